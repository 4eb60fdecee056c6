"""The grounding check: text and numbers from the conversation ground a call; the model's own words do not."""

from __future__ import annotations

import pytest

from cortana.agent.grounding import conversation_evidence, is_fully_grounded, is_grounded, is_grounded_addition
from cortana.messages import Message, ToolCall
from cortana.tools import SchemaTool

VOLUME = SchemaTool(
    "music_set_volume",
    "Set the volume.",
    {"type": "object", "properties": {"level": {"type": "integer"}}, "required": ["level"]},
    print,
)
CONVERT = SchemaTool(
    "currency_convert",
    "Convert money.",
    {
        "type": "object",
        "properties": {
            "amount": {"type": "number"},
            "from_currency": {"type": "string"},
            "to_currency": {"type": "string"},
        },
    },
    print,
)
ORDER = SchemaTool(
    "order_status",
    "Status of an order.",
    {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "detail": {"type": "string", "enum": ["short", "full"]},
            "format": {"type": "string", "default": "plain text"},
            "notify": {"type": "boolean"},
        },
    },
    print,
)


def grounded(tool: SchemaTool, prompt: str, **arguments: object) -> bool:
    call = ToolCall(id="c", name=tool.name, arguments=arguments, from_text=True)
    return is_grounded(call, tool, conversation_evidence([Message.user(prompt)]))


@pytest.mark.parametrize(
    ("prompt", "level"),
    [
        ("Set the volume to 35.", 35),
        ("Volume to fifteen please", 15),
        ("turn it down to one hundred and five", 105),
        ("put the music at half volume", 50),
        ("Mute it", 0),  # 0 and 1 always count
        ("Raise it to 1,200 (my speakers are odd)", 1200),
    ],
)
def test_numbers_the_user_gave_ground_a_call(prompt: str, level: int) -> None:
    assert grounded(VOLUME, prompt, level=level)


def test_an_invented_number_does_not() -> None:
    assert not grounded(VOLUME, "How loud is my music right now?", level=50)


def test_percentages_count_as_the_number_and_its_hundredth() -> None:
    assert grounded(CONVERT, "Take 5% of the balance", amount=0.05)
    assert grounded(CONVERT, "Take 5 percent of the balance", amount=5)


def test_any_grounded_argument_grounds_the_call_and_short_codes_are_not_checked() -> None:
    assert grounded(CONVERT, "How many yen is one hundred and fifty British pounds?", amount=150, from_currency="GBP")
    assert grounded(CONVERT, "Convert my savings to euros", amount=999, to_currency="euros")


def test_enum_values_defaults_booleans_and_unknown_keys_are_not_checked() -> None:
    prompt = "Is my order on its way?"
    assert grounded(ORDER, prompt, detail="full", format="plain text", notify=True, required=["order_id"])
    assert not grounded(ORDER, prompt, order_id="ORDER-INVENTED-7731")


def test_plurals_fold_and_the_models_own_prose_is_not_evidence() -> None:
    assert grounded(ORDER, "Where are the parcels I ordered?", order_id="parcel")
    call = ToolCall(id="c", name="music_set_volume", arguments={"level": 70}, from_text=True)
    evidence = conversation_evidence([Message.user("How loud is it?"), Message.assistant("I'll set it to 70.")])
    assert not is_grounded(call, VOLUME, evidence)
    results = conversation_evidence([Message.user("Match the kitchen."), Message(role="tool", content="kitchen: 70")])
    assert is_grounded(call, VOLUME, results), "a tool's result is evidence"


def test_fully_grounded_wants_every_checkable_argument() -> None:
    evidence = conversation_evidence([Message.user("Convert 250 euros to yen.")])

    def full(tool: SchemaTool, **arguments: object) -> bool:
        return is_fully_grounded(ToolCall(id="c", name=tool.name, arguments=arguments), tool, evidence)

    assert full(CONVERT, amount=250, from_currency="EUR", to_currency="JPY"), "codes are not checked"
    assert not full(CONVERT, amount=100, from_currency="EUR", to_currency="JPY"), "an invented amount"
    assert full(ORDER, detail="full", notify=True), "nothing to check: nothing invented either"
    assert not full(ORDER, order_id="Lisbon warehouse", detail="full"), "the one checkable value is invented"


LIGHTS = SchemaTool(
    "set_lights",
    "Lights on or off in a room.",
    {"type": "object", "properties": {"room": {"type": "string"}, "power": {"type": "string", "enum": ["on", "off"]}}},
    print,
)
LOCK = SchemaTool(
    "lock_door",
    "Lock a door.",
    {"type": "object", "properties": {"door": {"type": "string", "enum": ["front", "back"]}}},
    print,
)


def test_an_added_call_of_a_new_tool_needs_a_value_of_its_own() -> None:
    evidence = conversation_evidence([Message.user("Turn off the kitchen and hallway lights, lock the front door.")])
    kitchen = ToolCall(id="a", name="set_lights", arguments={"room": "kitchen", "power": "off"})
    earlier = [(kitchen, LIGHTS)]

    def added(tool: SchemaTool, **arguments: object) -> bool:
        call = ToolCall(id="b", name=tool.name, arguments=arguments, extra=True)
        return is_grounded_addition(call, tool, evidence, earlier)

    assert added(LIGHTS, room="hallway", power="off"), "the same tool again, with a value from the question"
    assert added(LOCK, door="front"), "a new tool with nothing checkable"
    assert not added(ORDER, order_id="kitchen"), "a new tool fed only the first call's input"
    assert not added(LIGHTS, room="garage", power="off"), "an invented room"


def test_an_added_call_of_a_new_tool_needs_a_message_that_asks_for_several_things() -> None:
    kitchen = ToolCall(id="a", name="set_lights", arguments={"room": "kitchen", "power": "off"})

    def added(prompt: str, tool: SchemaTool, **arguments: object) -> bool:
        call = ToolCall(id="b", name=tool.name, arguments=arguments, extra=True)
        return is_grounded_addition(call, tool, conversation_evidence([Message.user(prompt)]), [(kitchen, LIGHTS)])

    # one request, a chain ("then"), or numbers in a formula: a new tool's call is the model spraying
    assert not added("Kitchen lights off, it's 25 degrees in here", VOLUME, level=25)
    assert not added("Kitchen lights off, then set the music to 25 for dinner", VOLUME, level=25)
    assert not added("Kitchen lights off: C3H8 + O2 -> CO2 + 25 H2O", VOLUME, level=25)
    # joined, or listed: several requests
    assert added("Kitchen lights off and the music to 25", VOLUME, level=25)
    assert added("Kitchen lights off; music at 25", VOLUME, level=25)
    assert added("Two things:\n- kitchen lights off\n- music at 25", VOLUME, level=25)
    # the same tool again is another of what was asked, joined or not
    assert is_grounded_addition(
        ToolCall(id="b", name="set_lights", arguments={"room": "hallway", "power": "off"}, extra=True),
        LIGHTS,
        conversation_evidence([Message.user("Kitchen lights off, hallway lights off")]),
        [(kitchen, LIGHTS)],
    )


def test_zero_and_one_are_a_new_calls_own_value_only_when_the_message_says_them() -> None:
    order = ToolCall(id="a", name="order_status", arguments={"order_id": "A-77"})

    def added(prompt: str, level: int) -> bool:
        call = ToolCall(id="b", name=VOLUME.name, arguments={"level": level}, extra=True)
        return is_grounded_addition(call, VOLUME, conversation_evidence([Message.user(prompt)]), [(order, ORDER)])

    assert not added("Status of order A-77 and tell me all about it", 1), "1 passes the check, but nobody said it"
    assert added("Status of order A-77, and the volume to 1 please", 1)
    assert added("Status of order A-77, and set the volume once to one", 1)


def test_the_request_is_what_the_user_typed_not_the_turn_context() -> None:
    typed = "<context>\nLocal time: Tue 1 Dec 2026 09:00, and you were away 2 hours\n</context>\n\nKitchen lights off"
    evidence = conversation_evidence([Message.user(typed)])
    assert evidence.request == "Kitchen lights off"
    kitchen = ToolCall(id="a", name="set_lights", arguments={"room": "kitchen", "power": "off"})
    call = ToolCall(id="b", name=VOLUME.name, arguments={"level": 2}, extra=True)
    assert not is_grounded_addition(call, VOLUME, evidence, [(kitchen, LIGHTS)]), "the context's 'and' asks for nothing"
