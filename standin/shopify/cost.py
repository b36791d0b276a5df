"""Shopify's calculated query cost and the leaky bucket it is charged to, as shopify.dev describes them.

Cost, before the query runs (requestedQueryCost): a scalar or enum field 0, an object 1, a connection 2 plus
`first` (or `last`) times the cost of one node, a list of objects taking `first` that many times one object,
each mutation field 10.
What it charges in the end (actualQueryCost) counts what the answer holds: an object 1, a connection 2;
the bucket gets the difference back, as on Shopify. A mutation costs its 10 either way.
The bucket: per access token, `size` points, refilled at `restore_rate` points a second; a query whose
requested cost is more than what is left is not run (THROTTLED). A query dearer than the whole bucket can
never run: Shopify answers MAX_COST_EXCEEDED for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from graphql import (FieldNode, FragmentSpreadNode, GraphQLSchema, InlineFragmentNode, OperationDefinitionNode,
                     SelectionSetNode, get_named_type, is_leaf_type, is_list_type, get_nullable_type, value_from_ast)
from graphql.language import DocumentNode

MUTATION_COST = 10


def requested_cost(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode,
                   variables: dict) -> int:
    fragments = {d.name.value: d for d in document.definitions if d.kind == "fragment_definition"}
    if operation.operation.value == "mutation":
        return MUTATION_COST * len(_fields(operation.selection_set, fragments))
    return _cost(schema, schema.query_type, operation.selection_set, fragments, variables)


def _fields(selection_set: SelectionSetNode | None, fragments: dict) -> list[FieldNode]:
    found = []
    for s in selection_set.selections if selection_set else ():
        if isinstance(s, FieldNode):
            found.append(s)
        elif isinstance(s, InlineFragmentNode):
            found += _fields(s.selection_set, fragments)
        elif isinstance(s, FragmentSpreadNode) and s.name.value in fragments:
            found += _fields(fragments[s.name.value].selection_set, fragments)
    return found


def _cost(schema, parent, selection_set, fragments, variables) -> int:
    total = 0
    for node in _fields(selection_set, fragments):
        field = parent.fields.get(node.name.value) if hasattr(parent, "fields") else None
        if field is None or is_leaf_type(get_named_type(field.type)):
            continue
        target = get_named_type(field.type)
        page = _page_size(field, node, variables)
        if target.name.endswith("Connection"):
            # The connection's own 2, then `first` times what one node costs (asked as nodes or edges { node }).
            total += 2 + page * _node_cost(schema, target, node, fragments, variables)
        elif is_list_type(get_nullable_type(field.type)):
            total += page * (1 + _cost(schema, target, node.selection_set, fragments, variables))
        else:
            total += 1 + _cost(schema, target, node.selection_set, fragments, variables)
    return total


def _node_cost(schema, connection, node: FieldNode, fragments, variables) -> int:
    cost = 0
    for part in _fields(node.selection_set, fragments):
        if part.name.value == "nodes":
            node_type = get_named_type(connection.fields["nodes"].type)
            cost += 1 + _cost(schema, node_type, part.selection_set, fragments, variables)
        elif part.name.value == "edges":
            edge_type = get_named_type(connection.fields["edges"].type)
            cost += _cost(schema, edge_type, part.selection_set, fragments, variables)
    return cost


def _page_size(field, node: FieldNode, variables: dict) -> int:
    for arg in node.arguments or ():
        if arg.name.value in ("first", "last") and arg.name.value in field.args:
            value = value_from_ast(arg.value, field.args[arg.name.value].type, variables)
            if isinstance(value, int):
                return max(value, 0)
    return 1


def actual_cost(data, requested: int, is_write: bool) -> int:
    if is_write or data is None:
        return requested
    return min(requested, _objects(data) - 1)  # the root `data` object is not charged


def _objects(value) -> int:
    if isinstance(value, dict):
        own = 2 if "pageInfo" in value or "nodes" in value or "edges" in value else 1
        return own + sum(_objects(v) for v in value.values())
    if isinstance(value, list):
        return sum(_objects(v) for v in value)
    return 0


class Buckets:
    """A leaky bucket per access token, on a clock the tests may move forward."""

    def __init__(self, size: float, restore_rate: float, clock: Callable[[], float]):
        self.size, self.restore_rate, self._clock = float(size), float(restore_rate), clock
        self._levels: dict[str, tuple[float, float]] = {}  # token -> (available, when)
        self._lock = threading.Lock()

    def available(self, token: str) -> float:
        now = self._clock()
        level, when = self._levels.get(token, (self.size, now))
        return min(self.size, level + max(0.0, now - when) * self.restore_rate)

    def take(self, token: str, cost: int) -> tuple[bool, float]:
        """(taken?, what is left afterwards or, when not taken, what there was)."""
        with self._lock:
            level = self.available(token)
            # A level refilled to the cost exactly (a wait of (cost - level) / rate) may come out a hair short in
            # floating point (clock times near 10^4 s): that hair is not a shortfall.
            if cost > level + 1e-6:
                self._levels[token] = (level, self._clock())
                return False, level
            self._levels[token] = (level - cost, self._clock())
            return True, level - cost

    def give_back(self, token: str, points: float) -> float:
        """Return what a query was charged beyond its actual cost; the level afterwards."""
        with self._lock:
            level = min(self.size, self.available(token) + max(0.0, points))
            self._levels[token] = (level, self._clock())
            return level

    def set_level(self, token: str, level: float) -> None:
        with self._lock:
            self._levels[token] = (min(self.size, max(0.0, level)), self._clock())

    def status(self, level: float) -> dict:
        return {"maximumAvailable": self.size, "currentlyAvailable": round(level, 1), "restoreRate": self.restore_rate}
