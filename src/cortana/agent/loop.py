"""The run lifecycle, written once for ``run`` and ``run_stream``.

    prompt + thread
      -> Run.start      a snapshot: the agent's RunConfig and RunDeps (engine, memory, tools, extensions);
                        the user's message cut to half the window if longer (PromptCut);
                        memory: history; extensions (memory's part first): context blocks
                        and tools, gathered at once;
                        messages = system + history + (<context> + user message)
      -> call_model     fit the window first (at threshold x window: summarize older turns, keep
                        this one), then stream the answer
      -> screen         no tool calls            -> answer -> RunResult
                                                    (with output_type: the answer validated as the type;
                                                    else one more call, held to its schema, without tools)
                        ungrounded text calls    -> ask again without tools
                        only repeats             -> restate the question once,
                                                    then ask again without tools
                        tool calls               -> spend an iteration (or stop at the limit)
                                                 -> run_tools: authorize, validate, run with
                                                    bounded concurrency, results in request order
                                                    (defer_approvals: calls a person must allow
                                                    wait; the others run; the run pauses: finish)
                                                 -> next model call
      -> finish         RunResult (paused: its RunState); extensions' after_turn in the background

    RunState + answers (Agent.resume)
      -> Run.resume     the same agent and tools? (agent/approvals.py) the transcript, budget, metrics
      -> resume_tools   the waiting calls run or are refused; the round is stored whole
      -> call_model ... as above (it may pause again)

Every message is handed to memory as soon as it is final, so an engine that
dies mid-turn loses nothing already said. The steps are methods of
:class:`~cortana.agent.run.Run`, which holds the turn's state.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from cortana.agent.events import PromptCut, RunEvent, RunFinished, TextDelta
from cortana.agent.run import Run, TurnRequest, Verdict
from cortana.agent.run_config import RunConfig, RunDeps
from cortana.streams import closing

__all__ = ["run_events"]


async def run_events(config: RunConfig, deps: RunDeps, request: TurnRequest) -> AsyncGenerator[RunEvent, None]:
    """Run one turn under ``config`` with ``deps`` (or go on with the paused one ``request`` holds) and yield its
    events; the last is :class:`RunFinished`."""
    if request.paused is None:
        run = await Run.start(config, deps, request)
        if run.cut is not None:
            yield PromptCut(run.cut)
    else:
        run = await Run.resume(config, deps, request)
        async with closing(run.resume_tools()) as opened:
            async for event in opened:
                yield event
    while True:
        async with closing(run.call_model()) as opened:
            async for event in opened:
                yield event
        assert run.response is not None
        screened = run.screen(run.response.message)
        if screened.verdict is Verdict.ANSWER:
            if screened.shown:
                yield TextDelta(screened.shown)
            await run.answer(screened.reply)
            if run.output is None or run.typed_answer(screened.reply):
                break
            continue  # the typed answer is the last step: one more call, held to the schema
        if screened.verdict is Verdict.NO_SUCH_TOOL:
            await run.no_such_tool(screened.reply)
        elif screened.verdict is Verdict.WITHHOLD_TOOLS:
            run.withhold_tools = True
        elif screened.verdict is Verdict.NUDGE:
            await run.nudge()
        elif screened.verdict is Verdict.ASK_AGAIN:
            await run.ask_again(screened.reply)
        elif screened.verdict is Verdict.RETRY:
            await run.retry(screened.reply)
        else:
            await run.spend_iteration(screened.reply)
            async with closing(run.run_tools(screened.reply)) as opened:
                async for event in opened:
                    yield event
            if run.paused:
                break  # some calls wait for a person: the run ends here, to be resumed with their answers
    yield RunFinished(run.finish())
