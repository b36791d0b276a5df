"""The house plan holds (docs/architecture.md): the import-linter contracts in .importlinter are kept, no
module imports another of ours inside a function except where the app registry requires it, and the task
names the desk queues by are real tasks.
"""

import ast
import pathlib
import re
import subprocess
import sys

import grimp

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The imports of our own modules written inside a function, and why each must be: (file, module imported).
DEFERRED_ALLOWED = {
    ("support/apps.py", "support"),  # SupportConfig.ready: modules that import models, after the registry
    ("support/apps.py", "support.desk"),
    ("support/apps.py", "support.ops"),  # tracing on before the first request builds the middleware chain
}


def test_every_import_linter_contract_is_kept():
    lint = pathlib.Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--config", ".importlinter", "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    counted = re.search(r"Contracts: (\d+) kept, (\d+) broken", done.stdout)
    assert done.returncode == 0 and counted, done.stdout[-4000:] + done.stderr[-2000:]
    assert int(counted.group(1)) >= 6 and counted.group(2) == "0"


def test_support_has_no_import_cycle_even_counting_imports_inside_functions():
    graph = grimp.build_graph("support", "agentsite", cache_dir=None)
    ours = sorted(m for m in graph.modules if not m.startswith("support.migrations"))
    cycles = []
    for module in ours:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(("support", "agentsite")) and graph.chain_exists(importer=imported, imported=module):
                cycles.append(f"{module} -> {imported}")
    assert cycles == []


def _deferred_imports():
    """(file, module) for each import of ours written inside a function or method."""
    found = []
    for path in sorted([*ROOT.glob("support/**/*.py"), *ROOT.glob("agentsite/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if "/migrations/" in rel:
            continue
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                found += [(rel, name) for name in names if name.split(".")[0] in ("support", "agentsite")]
    return found


def test_imports_inside_functions_are_only_the_app_registrys():
    deferred = _deferred_imports()
    assert set(deferred) <= DEFERRED_ALLOWED, sorted(set(deferred) - DEFERRED_ALLOWED)
    assert len(deferred) <= 5


def test_the_finder_of_imports_inside_functions_finds_one(tmp_path, monkeypatch):
    # The check above must be able to fail: a deferred import in a module is found.
    module = ROOT / "support" / "_architecture_probe.py"
    module.write_text("def f():\n    from support.desk import services\n")
    try:
        assert ("support/_architecture_probe.py", "support.desk") in _deferred_imports()
    finally:
        module.unlink()


def test_the_task_the_desk_queues_runs_by_is_a_real_task():
    from agentsite.celery import app
    from support.desk import queue

    app.loader.import_default_modules()
    assert {queue.RUN_AGENT, queue.EMAIL_APPROVAL, queue.SLACK_APPROVAL, queue.REPLY_EMAIL} <= set(app.tasks)
