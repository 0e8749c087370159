#!/usr/bin/env python3
"""Acceptance: the real `codex` agent CLI from npm does a WorkUnit under egress-exec, through
egressd, against the lab's scripted model (integration/agenttest.py has the whole story)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import agenttest  # noqa: E402

if __name__ == "__main__":
    sys.exit(agenttest.main("codex"))
