"""Tests that attack Cortana as a hostile repository, model, tool or server would."""
