"""The fix workflow's stages (``graph.py``) and the work they do, one concern a module.

    graph.py      the stages, each a class whose run(run, deps) returns the next stage or the result:
                  Tests, Localize, Round, Asking, EndRound, Climb
    localize.py   where the change goes: ranked locations cut to a prompt's few, the model's pick among them
    sample.py     the prompts a round asks, and one ask's answers made into patches
    judge.py      each patch tested in the scratch copy, merged with others, kept, held or set aside, trimmed
    mutate.py     the small changes tried without a model
    climb.py      between rounds: the climb to a partial fix, the hand-over to a larger model
    renames.py    renames made without a model, right after the tests
    report.py     the result and its message, the plan, failures in words

``graph.py`` imports the modules that do the work, and none of them imports it. Nothing is imported here, so one
module of the package loads without the rest.
"""
