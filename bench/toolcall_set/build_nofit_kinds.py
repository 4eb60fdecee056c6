"""Write ``cases_c.jsonl``: three kinds of questions no offered tool answers (issue 63).

The questions of the first two kinds are the set's own single-call questions
(``cases_a.jsonl``, ``cases_b.jsonl``, written by authors who had not seen
Cortana's heuristics); only the tools offered change, by the fixed rules below:

- ``unrelated`` (the xlam-irrelevance recipe): the right tool removed, the
  tools of a question from the other file offered instead (``a-007`` gets
  ``b-007``'s tools and the other way round; the files cover different fields,
  so none of them answers; a web search, which answers almost anything, is left
  out);
- ``samefield``: one tool only, from the question's own field, that does
  something else (a circle's area asked, a sphere's volume offered), picked
  by hand in ``SAME_FIELD`` before any model answered these cases;
- ``general``: 40 new general-knowledge, chat and writing questions, asked
  with the assistant's six workspace tools (``tools_workspace.json``, a
  snapshot of ``cortana.tools.builtin``).

A derived case keeps its source question's half (development or held out), so
no question is on both sides; the general questions are split by the hash of
their ids, as every other category is.

    python bench/toolcall_set/build_nofit_kinds.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

SAME_FIELD = {
    "a-001": "air_quality_current",
    "a-002": "air_quality_current",
    "a-003": "hotel_search",
    "a-004": "hotel_search",
    "a-005": "flight_search",
    "a-006": "flight_status",
    "a-007": "weather_forecast",
    "a-008": "loan_monthly_payment",
    "a-009": "sphere_volume",
    "a-010": "greatest_common_divisor",
    "a-011": "potential_energy",
    "a-012": "kinetic_energy",
    "a-013": "numbers_mean_median",
    "a-014": "greatest_common_divisor",
    "a-015": "prime_check",
    "a-016": "directory_list",
    "a-017": "file_read",
    "a-018": "code_lint",
    "a-019": "code_lint",
    "a-020": "git_diff",
    "a-021": "tests_run",
    "a-022": "moles_from_mass",
    "a-023": "dna_reverse_complement",
    "a-024": "dna_translate",
    "a-025": "molar_mass",
    "a-026": "molar_mass",
    "a-027": "dna_gc_content",
    "a-028": "dna_reverse_complement",
    "a-029": "molar_mass",
    "a-030": "ph_from_concentration",
    "a-031": "circle_area",
    "a-032": "air_quality_current",
    "b-001": "email_search_inbox",
    "b-002": "stock_get_news",
    "b-003": "bank_get_balance",
    "b-004": "bank_send_payment",
    "b-005": "shop_search_products",
    "b-006": "text_detect_language",
    "b-007": "text_summarize",
    "b-008": "home_set_fan_speed",
    "b-009": "home_set_blinds",
    "b-010": "home_set_lights",
    "b-011": "music_set_volume",
    "b-012": "music_skip_track",
    "b-013": "task_list",
    "b-014": "contact_add",
    "b-015": "web_get_page_title",
    "b-016": "web_search_news",
    "b-017": "text_count_words",
    "b-018": "web_get_page_title",
    "b-019": "calendar_list_events",
    "b-020": "calendar_find_free_slot",
    "b-021": "music_play_playlist",
    "b-022": "music_pause",
    "b-023": "bank_get_balance",
    "b-024": "shop_list_orders",
    "b-025": "note_search",
    "b-026": "task_complete",
    "b-027": "contact_find",
    "b-028": "home_set_thermostat",
    "b-029": "home_set_lights",
    "b-030": "music_skip_track",
    "b-031": "shop_get_order_status",
    "b-032": "email_forward",
    "b-033": "stock_company_profile",
    "b-034": "email_reply",
}
"""Each single-call question's one offered tool: its own field, another job."""

UNIVERSAL = {"web_search", "web_search_news"}
"""Tools that answer almost any question (a web search finds Delhi's air quality): never offered as unrelated."""

GENERAL = [
    "What causes the seasons on Earth?",
    "Who painted the ceiling of the Sistine Chapel?",
    "Explain what a linked list is in one paragraph.",
    "What's the difference between weather and climate?",
    "Write a limerick about a cat who loves boxes.",
    "How many legs does a spider have?",
    "What is the boiling point of water at sea level in Fahrenheit?",
    "Give me three tips for a good night's sleep.",
    "What does the acronym 'NASA' stand for?",
    "Why is the sky blue?",
    "Suggest a name for a small bakery that sells sourdough.",
    "What is the plural of 'cactus'?",
    "Summarize the plot of Romeo and Juliet in two sentences.",
    "What year did the Berlin Wall fall?",
    "How do vaccines train the immune system?",
    "What's a good way to apologize to a friend I forgot to call back?",
    "Explain the difference between 'affect' and 'effect'.",
    "What is photosynthesis?",
    "Which planet has the most moons?",
    "What is 15% of 80?",
    "Tell me a joke about programmers.",
    "What does a compiler do, in simple terms?",
    "Translate 'thank you' into Spanish and French.",
    "Who was the first person to walk on the Moon?",
    "What is the Pythagorean theorem?",
    "Describe the taste of a ripe mango to someone who has never had one.",
    "Is a tomato a fruit or a vegetable?",
    "How should I prepare for a job interview?",
    "What's the longest river in the world?",
    "Explain what inflation means for my savings.",
    "Write a two-line poem about the sea.",
    "What is the speed of light?",
    "What is the difference between a virus and a bacterium?",
    "How do I politely decline a meeting invitation?",
    "What does 'carpe diem' mean?",
    "Name three famous composers of the Baroque period.",
    "What is a prime number?",
    "How does a refrigerator keep food cold?",
    "What's the capital of Canada?",
    "Give me a synonym for 'happy'.",
]
"""General questions, none in ``bench/judge_set`` or ``bench/newcomer.py``."""


def main() -> None:
    from hashlib import sha256

    lines = [line for name in ("a", "b") for line in (HERE / f"cases_{name}.jsonl").read_text().splitlines()]
    cases = {json.loads(line)["id"]: json.loads(line) for line in lines}
    singles = {case_id: case for case_id, case in cases.items() if case["category"] == "single"}
    rows = []
    for case_id, case in sorted(singles.items()):
        other = ("b" if case_id[0] == "a" else "a") + case_id[1:]
        partner = singles.get(other) or singles[("b" if case_id[0] == "a" else "a") + "-001"]
        rows.append(
            {
                "id": f"c-unrelated-{case_id}",
                "category": "unrelated",
                "source": case_id,
                "tools": [tool for tool in partner["tools"] if tool not in UNIVERSAL],
                "prompt": case["prompt"],
                "expected": [],
            }
        )
    for case_id, case in sorted(singles.items()):
        tool = SAME_FIELD[case_id]
        assert tool not in {call["name"] for call in case["expected"]}, case_id
        rows.append(
            {
                "id": f"c-samefield-{case_id}",
                "category": "samefield",
                "source": case_id,
                "tools": [tool],
                "prompt": case["prompt"],
                "expected": [],
            }
        )
    workspace = [tool["function"]["name"] for tool in json.loads((HERE / "tools_workspace.json").read_text())]
    for number, prompt in enumerate(GENERAL, 1):
        rows.append(
            {
                "id": f"c-general-{number:03d}",
                "category": "general",
                "tools": workspace,
                "prompt": prompt,
                "expected": [],
            }
        )
    assert len({sha256(r["id"].encode()).hexdigest() for r in rows}) == len(rows)
    (HERE / "cases_c.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(rows)} cases written to cases_c.jsonl")


if __name__ == "__main__":
    main()
