# SPDX-License-Identifier: MIT
"""csource.py: reads C files well enough for the style checks: includes, definitions, uses.

Not a C parser: comments and literals are stripped, preprocessor lines are read for
#include and #define, and the rest is split into tokens whose top level (brace depth 0) is
classified. That is enough for this project's code, which clang-format keeps regular:
  - includes: every #include "x" and <x>, with its line;
  - definitions: functions (static or not, with the lines of their braces), variables, struct,
    union and enum tags with a body, enum constants, typedef names and macros;
  - uses: every identifier that is not a member name (after . or ->) and every tag named
    after struct/union/enum, each with its first line;
  - tables: the lines of array initializers (`name[...] = { ... }`), which the size check
    treats as data rather than code.
"""
import re

_LITERALS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_TOKEN = re.compile(r'[A-Za-z_]\w*|\.?\d[\w.]*|->|\.\.\.|<<=?|>>=?|[-+*/%&|^!<>=]=|&&|\|\||\+\+|--'
                    r'|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|\S')
_INCLUDE = re.compile(r'#\s*include\s*([<"])([^">]+)[">]')
_DEFINE = re.compile(r'#\s*define\s+([A-Za-z_]\w*)(\(([^)]*)\))?(.*)', re.S)
_IDENT = re.compile(r'[A-Za-z_]\w*$')

KEYWORDS = frozenset(
    """auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while _Bool _Static_assert static_assert _Alignas
    _Alignof _Atomic _Noreturn _Thread_local __attribute__ __typeof__ typeof bool true false
    NULL defined""".split())
TAG_WORDS = ("struct", "union", "enum")
_DECLARATOR_END = (";", ",", ")", "[", ":", "=")
_NOT_TYPES = frozenset("return case goto sizeof else do".split())
QUEUE_HEADS = ("TAILQ_HEAD", "LIST_HEAD", "SLIST_HEAD", "STAILQ_HEAD")


class Function:
    """A function definition: its name, whether static, and the lines of its braces."""

    def __init__(self, name, static, open_line, close_line):
        self.name = name
        self.static = static
        self.open_line = open_line
        self.close_line = close_line


class Source:
    """What one C file says: see the module's comment."""

    def __init__(self, path, text):
        self.path = path
        self.is_header = path.endswith(".h")
        self.nlines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        self.includes = []  # (name, quoted, line)
        self.macros = set()
        self.functions = []  # Function
        self.variables = {}  # name -> static
        self.tags = set()  # tags defined with a body
        self.constants = set()  # enum constants
        self.typedefs = set()
        self.declared = set()  # prototypes, extern variables, tags declared without a body
        self.uses = {}  # identifier or "tag NAME" -> first line
        self.table_lines = set()
        self._tokens = []  # (token, line)
        self._read(_LITERALS.sub(_blank, text))
        self._parse()

    def exported(self):
        """The names other files may use: what a header defines, and a .c file's non-static
        functions and variables (and the tags whose body it holds)."""
        names = {f.name for f in self.functions if not f.static or self.is_header}
        names |= {n for n, static in self.variables.items() if not static}
        names |= {"tag " + t for t in self.tags}
        if self.is_header:
            names |= self.macros | self.constants | self.typedefs
        return names

    def exported_functions(self):
        """The functions other files may call (a header's static inline ones included)."""
        return {f.name for f in self.functions if not f.static or self.is_header}

    def defined(self):
        """Every name defined here, static or not: uses of these stay in the file."""
        names = {f.name for f in self.functions} | set(self.variables)
        names |= {"tag " + t for t in self.tags}
        return names | self.macros | self.constants | self.typedefs

    def _read(self, text):
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            start, line = i + 1, lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            i += 1
            if line.lstrip().startswith("#"):
                self._directive(line.strip(), start)
            else:
                self._tokens.extend((t, start) for t in _TOKEN.findall(line))

    def _directive(self, line, lineno):
        m = _INCLUDE.match(line)
        if m:
            self.includes.append((m.group(2), m.group(1) == '"', lineno))
            return
        m = _DEFINE.match(line)
        if not m:
            return
        self.macros.add(m.group(1))
        params = set(re.findall(r"\w+", m.group(3) or ""))
        body = [t for t in _TOKEN.findall(m.group(4)) if t not in params]
        self._note_uses([(t, lineno) for t in body])

    def _note_uses(self, toks, skip=()):
        for k, (t, line) in enumerate(toks):
            if k in skip or not _IDENT.match(t) or t in KEYWORDS:
                continue
            prev = toks[k - 1][0] if k else ""
            after = toks[k + 1][0] if k + 1 < len(toks) else ""
            if prev in (".", "->"):
                continue
            # A declarator ("struct x *name;", "int n,"): the name declared, not a use.
            if after in _DECLARATOR_END and (prev == "*" or (_IDENT.match(prev) and
                                                             prev not in _NOT_TYPES)):
                continue
            key = "tag " + t if prev in TAG_WORDS else t
            self.uses.setdefault(key, line)

    def _match(self, i, open_tok, close_tok):
        depth = 0
        for j in range(i, len(self._tokens)):
            t = self._tokens[j][0]
            if t == open_tok:
                depth += 1
            elif t == close_tok:
                depth -= 1
                if depth == 0:
                    return j
        return len(self._tokens) - 1

    def _parse(self):
        toks = self._tokens
        self._find_tables()
        self._declared_at = set()  # token positions of names a prototype declares
        decl, i, linkage = [], 0, 0
        while i < len(toks):
            t, line = toks[i]
            if t == "{" and self._words(decl) == ["extern", '"C"']:
                decl, linkage, i = [], linkage + 1, i + 1  # extern "C" { ... }: see through
                continue
            if t == "}" and linkage:
                decl, linkage, i = [], linkage - 1, i + 1
                continue
            if t == "{":
                end = self._match(i, "{", "}")
                self._body(decl, i, end)
                if self._is_function(decl):
                    decl = []
                else:
                    decl.append(("{}", line, i))
                i = end + 1
                continue
            if t == ";":
                self._declaration(decl)
                decl = []
            else:
                decl.append((t, line, i))
            i += 1
        self._note_uses(toks, self._declared_at)

    def _find_tables(self):
        toks = self._tokens
        for i in range(1, len(toks) - 1):
            if toks[i][0] == "=" and toks[i + 1][0] == "{" and toks[i - 1][0] == "]":
                end = self._match(i + 1, "{", "}")
                self.table_lines.update(range(toks[i][1], toks[end][1] + 1))

    @staticmethod
    def _words(decl):
        return [d[0] for d in decl]

    def _is_function(self, decl):
        words = self._words(decl)
        if not words or words[0] == "typedef" or "=" in words or "(" not in words:
            return False
        return not _ends_with_tag(words)

    def _body(self, decl, i, end):
        words = self._words(decl)
        toks = self._tokens
        if self._is_function(decl):
            name = _name_before_paren(words)
            if name:
                static = "static" in words[: words.index(name)]
                self.functions.append(Function(name, static, toks[i][1], toks[end][1]))
            return
        if "=" in words or not _ends_with_tag(words):
            return  # an initializer: the name is recorded at the ';'
        if _IDENT.match(words[-1]) and words[-1] not in TAG_WORDS:
            self.tags.add(words[-1])
        if "enum" in words[-2:]:
            self._enumerators(i, end)

    def _enumerators(self, i, end):
        toks = self._tokens
        depth = 0
        for j in range(i, end):
            t = toks[j][0]
            depth += t in "({[" and 1 or 0
            depth -= t in ")}]" and 1 or 0
            if depth == 1 and _IDENT.match(t) and toks[j + 1][0] in (",", "=", "}"):
                if toks[j - 1][0] in ("{", ","):
                    self.constants.add(t)

    def _declaration(self, decl):
        words = self._words(decl)
        if not words or words[0] in ("static_assert", "_Static_assert"):
            return
        if words[0] in QUEUE_HEADS and len(words) > 2 and _IDENT.match(words[2]):
            self.tags.add(words[2])
            return
        if words[0] == "typedef":
            name = _pointer_name(words) or _declared_name(words)
            if name:
                self.typedefs.add(name)
            if len(words) == 4 and words[1] in TAG_WORDS:
                self.declared.add("tag " + words[2])  # typedef struct x x;
            return
        if "(" in words and "=" not in words and "{}" not in words:
            name = _pointer_name(words)  # "void (*hook)(int);" is a variable
            if name and "extern" not in words:
                self.variables[name] = "static" in words
                return
            name = name or _name_before_paren(words)
            self.declared.add(name)
            self._declared_at.update(d[2] for d in decl if d[0] == name)
            return
        if len(words) == 2 and words[0] in TAG_WORDS:
            self.declared.add("tag " + words[1])  # a forward declaration
            return
        name = _declared_name(words)
        if name and "extern" in words:
            self.declared.add(name)
        elif name:
            self.variables[name] = "static" in words


def _blank(m):
    s = m.group(0)
    if s.startswith("/*"):
        return " " + "\n" * s.count("\n")
    if s.startswith("//"):
        return " "
    return s


def _ends_with_tag(words):
    """Whether a declaration ends in "struct", "struct NAME" (a body follows)."""
    return words[-1] in TAG_WORDS or (len(words) > 1 and words[-2] in TAG_WORDS)


def _pointer_name(words):
    """NAME in "... (*NAME)(...)": a function pointer, not a prototype."""
    k = words.index("(") if "(" in words else -1
    if 0 < k < len(words) - 2 and words[k + 1] == "*" and _IDENT.match(words[k + 2]):
        return words[k + 2]
    return None


def _name_before_paren(words):
    depth = 0
    for k, w in enumerate(words):
        if w == "(":
            if depth == 0 and k and _IDENT.match(words[k - 1]) and words[k - 1] not in KEYWORDS:
                return words[k - 1]
            depth += 1
        elif w == ")":
            depth -= 1
    return None


def _declared_name(words):
    """The name a declaration declares: the last identifier before '=', '[' or the end,
    outside parentheses and braces."""
    cut = len(words)
    for k, w in enumerate(words):
        if w in ("=", "["):
            cut = k
            break
    for w in reversed(words[:cut]):
        if _IDENT.match(w) and w not in KEYWORDS:
            return w
        if w in ("}", "{}"):
            break
    return None


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return Source(path, f.read())
