#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check_layers.py: fails when daemon/, client/ or common/ stop being layered one way.

Reads every C file of those trees and builds two graphs between units (a file pair X.c/X.h,
or a lone file), both checked against the table in layers.py:
  - includes: unit A uses B when a file of A includes a header of B;
  - references: unit A uses B when a file of A names a function, variable, macro, type, tag or
    enum constant that B defines (one shared header, such as client/lib/internal.h, hides
    who calls whom from the include graph; this does not).
Fails, naming the files, on: a circle of units (each is reported with one concrete path
round it), a use that goes up a layer or into another program's files (other than those its
entry in PROGRAMS lists), a header a layer may not include (directly or through the
project's own headers), an include that could mean two files, and a unit in no layer.

Usage: check_layers.py [--root DIR] [--figures] [--graph includes|references]
--figures prints what was measured (units in circles, upward uses, mutual pairs) per graph,
and for a third graph, calls (references to functions only), which is not checked.
"""
import argparse
import collections
import fnmatch
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402
import layers  # noqa: E402

ROOTS = ("common", "daemon", "client")


class Unit:
    def __init__(self, key):
        self.key = key
        self.files = []
        self.program = None
        self.layer = None  # the LAYERS key
        self.rank = None


def program_of(path):
    best = None
    for name, (folder, _) in layers.PROGRAMS.items():
        if path.startswith(folder + "/") and (not best or len(folder) > len(best[1])):
            best = (name, folder)
    return best[0] if best else None


def layer_of(key):
    for pattern, layer in layers.LEGACY.items():
        if key == pattern or (pattern.endswith("/*") and fnmatch.fnmatch(key, pattern)):
            return layer
    best = None
    for folder in layers.LAYERS:
        inside = key == folder or key.startswith(folder + "/")
        if inside and (not best or len(folder) > len(best)):
            best = folder
    return best


def scan(root):
    sources, units = {}, {}
    for top in ROOTS:
        for base, dirs, names in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(base, name), root)
                sources[rel] = csource.read(os.path.join(root, rel))
                key = rel[:-2]
                unit = units.setdefault(key, Unit(key))
                unit.files.append(rel)
                unit.program = program_of(rel)
                unit.layer = layer_of(key)
                if unit.layer:
                    unit.rank = layers.LAYERS[unit.layer][0]
    return sources, units


def may_use(src, dst):
    """Whether unit src may use unit dst: None if it may, else why not."""
    if dst.program != src.program:
        allowed = layers.PROGRAMS.get(src.program, ("", ()))[1]
        return None if dst.program in allowed else "into another program"
    if src.rank is None or dst.rank is None:
        return None
    return "up a layer" if dst.rank > src.rank else None


def include_candidates(sources, path, name):
    """The scanned files an #include "name" in path may mean: none (a system or generated
    header), one, or several (the include must say which)."""
    here = os.path.dirname(path)
    direct = os.path.normpath(os.path.join(here, name))
    if direct in sources:
        return [direct]
    found = [p for p in sources if p == name or p.endswith("/" + name)]
    if len(found) > 1:
        prog = program_of(path)
        allowed = (prog,) + layers.PROGRAMS.get(prog, ("", ()))[1]
        found = [p for p in found if program_of(p) in allowed] or found
    return found


def resolve_include(sources, path, name):
    found = include_candidates(sources, path, name)
    return found[0] if len(found) == 1 else None


def include_graph(sources, problems):
    edges = collections.defaultdict(dict)  # unit -> {unit: (file, line, what)}
    for path, src in sources.items():
        for name, quoted, line in src.includes:
            if not quoted:
                continue
            found = include_candidates(sources, path, name)
            if len(found) > 1:
                problems.append('%s:%d: #include "%s" could be %s: name the folder' % (
                    path, line, name, " or ".join(found)))
            if len(found) != 1:
                continue
            a, b = path[:-2], found[0][:-2]
            target = found[0]
            if a != b:
                edges[a].setdefault(b, (path, line, target))
    return edges


def reference_graph(sources, units, calls_only=False):
    """Who uses whose names; with calls_only, who calls whose functions (for --figures)."""
    definers = collections.defaultdict(set)  # name -> units that define it for others
    declarers = collections.defaultdict(set)  # name -> units whose header declares it
    for path, src in sources.items():
        for name in src.exported_functions() if calls_only else src.exported():
            definers[name].add(path[:-2])
        if src.is_header:
            for name in src.declared:
                if not name.startswith("tag "):
                    declarers[name].add(path[:-2])
    edges = collections.defaultdict(dict)
    for path, src in sources.items():
        me = units[path[:-2]]
        # What the unit defines is its own (a prototype is no use of what it declares).
        own = set()
        opaque = {n for f in me.files for n in sources[f].declared if n.startswith("tag ")}
        for f in me.files:
            own |= sources[f].defined()
        for name, line in sorted(src.uses.items(), key=lambda x: x[1]):
            if name in own or name == "main":
                continue
            target = resolve_name(me, units, definers.get(name, ()),
                                  declarers.get(name, ()), name in opaque)
            if target:
                edges[me.key].setdefault(target, (path, line, name))
    return edges


def resolve_name(me, units, defs, decls, opaque):
    """The unit a use in unit me means: a definer in its own program (the same folder's
    first), else one in a program it may use, else a header there declaring the name; an
    opaque type (declared here, its body in a program me may not use) means none."""
    allowed = layers.PROGRAMS.get(me.program, ("", ()))[1]
    defs = [units[k] for k in defs if k != me.key]
    decls = [units[k] for k in decls if k != me.key]
    for group in ([u for u in defs if u.program == me.program],
                  [u for u in defs if u.program in allowed],
                  [u for u in decls if u.program == me.program or u.program in allowed]):
        if group:
            same_dir = [u for u in group if os.path.dirname(u.key) == os.path.dirname(me.key)]
            group = same_dir or group
            return group[0].key if len(group) == 1 else None
    if defs and not opaque:
        return defs[0].key if len(defs) == 1 else None
    return None


def circles(edges, keys):
    """Strongly connected components of more than one unit (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(keys):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def path_round(edges, comp):
    """One circle through the component's first unit, as a list of units."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, collections.deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(edges.get(v, {})):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def forbidden(sources, units, problems):
    """Headers a layer may not include, followed through the project's own headers."""
    closure = {}

    def reach(path, seen):
        if path in closure:
            return closure[path]
        found = {}
        for name, quoted, line in sources[path].includes:
            target = resolve_include(sources, path, name) if quoted else None
            if target is None:
                found.setdefault(name, [path])
            elif target not in seen:
                for h, chain in reach(target, seen | {target}).items():
                    found.setdefault(h, [path] + chain)
        closure[path] = found
        return found

    for path in sorted(sources):
        unit = units[path[:-2]]
        banned = layers.FORBIDDEN.get(unit.layer, ())
        for header, chain in sorted(reach(path, {path}).items()):
            if header in banned:
                problems.append("%s (%s) includes <%s>%s" % (
                    path, unit.layer, header,
                    " through " + " -> ".join(chain[1:]) if len(chain) > 1 else ""))


def check_graph(name, edges, units, problems, figures):
    upward, mutual = [], set()
    for a, targets in sorted(edges.items()):
        for b, (path, line, what) in sorted(targets.items()):
            why = may_use(units[a], units[b])
            if why:
                upward.append("%s:%d: %s %s (%s) -> %s (%s): %s" % (
                    path, line, "includes" if name == "includes" else "uses", what,
                    units[a].layer, b, units[b].layer, why))
            if a in edges.get(b, {}):
                mutual.add(tuple(sorted((a, b))))
    comps = circles(edges, units.keys())
    for comp in comps:
        problems.append("%s: circle of %d units: %s; for example %s" % (
            name, len(comp), ", ".join(comp), " -> ".join(path_round(edges, comp))))
    problems.extend(upward)
    if figures is not None:
        figures.append((name, comps, upward, sorted(mutual), edges))


def print_figures(figures, units):
    for name, comps, upward, mutual, edges in figures:
        nedges = sum(len(t) for t in edges.values())
        print("== %s graph: %d units, %d arrows" % (name, len(units), nedges))
        for top in ("daemon", "client/lib", "client/ctl", "client/torch", "common"):
            sizes = [len([u for u in c if u.startswith(top + "/")]) for c in comps]
            sizes = [s for s in sizes if s]
            ups = [u for u in upward if u.startswith(top + "/")]
            pairs = [p for p in mutual if p[0].startswith(top + "/")]
            print("%-13s units in circles: %-12s upward: %3d  mutual pairs: %d" % (
                top, "+".join(map(str, sizes)) or "0", len(ups), len(pairs)))
        for a, b in mutual:
            print("   mutual: %s <-> %s" % (a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--figures", action="store_true")
    ap.add_argument("--graph", choices=("includes", "references"))
    args = ap.parse_args()
    sources, units = scan(os.path.abspath(args.root))
    problems, figures = [], [] if args.figures else None
    for unit in sorted(units.values(), key=lambda u: u.key):
        if unit.program is None or unit.layer is None:
            problems.append("%s: in no layer: put it in a layer folder (tests/style/layers.py)"
                            % ", ".join(unit.files))
    if args.graph != "references":
        check_graph("includes", include_graph(sources, problems), units, problems, figures)
    if args.graph != "includes":
        check_graph("references", reference_graph(sources, units), units, problems, figures)
    if args.graph is None:
        forbidden(sources, units, problems)
    if figures is not None:
        # Measured, not checked: its problems are the references graph's already.
        check_graph("calls", reference_graph(sources, units, True), units, [], figures)
        print_figures(figures, units)
    for p in problems:
        print(p)
    print("check_layers: %d problem(s) in %d files" % (len(problems), len(sources)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
