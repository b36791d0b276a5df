"""The console's ES modules (support/static/support/*.js): no import cycle, and one money() formatter.

Read as text, no browser: every `import … from "./x.js"`, `export … from "./x.js"` and `import "./x.js"` is
an edge of the graph. A cycle makes a module run before the one it imports has finished (a class used at
load time is then still undefined); several money() helpers made the same amount read three ways.
"""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[1] / "support" / "static" / "support"

# `import { a, b } from "./x.js"` (over several lines too), `import x from …`, `import * as x from …`,
# `export { a } from …`, `export * from …`, and the bare `import "./x.js"`.
RELATIVE_IMPORT = re.compile(
    r"""^\s*(?:import|export)\b(?:[^;"'`]*?\bfrom)?\s*["']\./([\w.-]+\.js)["']""",
    re.MULTILINE,
)
MONEY_DEFINED = re.compile(
    r"""\b(?:export\s+)?(?:async\s+)?function\s+money\s*\(|\b(?:const|let|var)\s+money\s*=""",
)


def modules() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(STATIC.glob("*.js"))}


def import_graph(sources: dict[str, str]) -> dict[str, list[str]]:
    return {name: sorted(set(RELATIVE_IMPORT.findall(text))) for name, text in sources.items()}


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """One cycle as a path whose first and last module are the same, or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in graph.get(node, []):
            if target in on_path:
                return path[path.index(target):] + [target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            found = visit(start)
            if found:
                return found
    return None


def test_the_parser_reads_imports_over_several_lines_and_re_exports():
    text = 'import {\n  a,\n  b,\n} from "./one.js";\nimport "./two.js";\nexport { c } from "./three.js";\n'
    assert sorted(RELATIVE_IMPORT.findall(text)) == ["one.js", "three.js", "two.js"]
    assert find_cycle({"a.js": ["b.js"], "b.js": ["c.js"], "c.js": ["a.js"]}) == ["a.js", "b.js", "c.js", "a.js"]
    assert find_cycle({"a.js": ["b.js"], "b.js": [], "c.js": ["a.js", "b.js"]}) is None


def test_every_relative_import_names_a_module_that_exists():
    sources = modules()
    graph = import_graph(sources)
    assert sum(len(targets) for targets in graph.values()) >= len(sources) // 2, graph  # the parser found them
    missing = {name: [t for t in targets if t not in sources] for name, targets in graph.items()}
    assert not {name: targets for name, targets in missing.items() if targets}


def test_the_console_modules_import_each_other_without_a_cycle():
    cycle = find_cycle(import_graph(modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_money_is_defined_in_exactly_one_module():
    defining = [name for name, text in modules().items() if MONEY_DEFINED.search(text)]
    assert len(defining) == 1, f"money() is defined in {len(defining)} modules: {', '.join(defining)}"
