#!/usr/bin/env python3
"""Reads a directed graph as lines "FROM TO" on stdin and prints one line per circle of any
length: "a -> b -> c -> a", the shortest circle through the first node (by name) of each
strongly connected component of more than one node. Exits 1 when it printed any.
scripts/include_cycles.sh uses it for both its views (includes and calls)."""
import sys
from collections import deque


def components(graph):
    """Strongly connected components (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                out.append(sorted(comp))
    return out


def shortest_circle(graph, comp):
    """The shortest path from comp[0] back to itself inside the component (breadth first)."""
    members, start = set(comp), comp[0]
    prev, queue = {}, deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in members:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if child not in prev:
                prev[child] = node
                queue.append(child)
    return comp + [start]


def main():
    graph = {}
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2 or parts[0] == parts[1]:
            continue
        graph.setdefault(parts[0], set()).add(parts[1])
        graph.setdefault(parts[1], set())
    found = [c for c in components(graph) if len(c) > 1]
    for comp in found:
        print(" -> ".join(shortest_circle(graph, comp)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
