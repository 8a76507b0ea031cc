#!/usr/bin/env python3
"""The link check of `make test`: every relative link and #anchor in every
Markdown file of the repository resolves.

A link is [text](target), ![alt](target) or a reference definition
[name]: target, outside fenced code blocks and code spans. Links with a
scheme (https:, mailto:) are not followed. A target's path is taken relative
to the file (or to the repository root when it starts with /) and must name a
file or directory; a #fragment on a Markdown file must name one of its
headings as GitHub spells anchors (the rendered text, lowercased, every
character but letters, digits, '_', '-' and spaces dropped, spaces made '-',
a repeated anchor suffixed -1, -2, ...) or an explicit <a name/id>; on any
other file only GitHub's line anchors (#L10, #L10-L20) are accepted.

Usage: linkcheck.py [--root DIR] [FILE.md ...]   (default: the repository's
                                                  tracked and new .md files)
       linkcheck.py --self-test                  (checks the checker)
Exit 0 when every link resolves, 1 with one line per broken link, 2 on bad use.
Standard library only.
"""
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
HEADING = re.compile(r'^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$')
SETEXT = re.compile(r'^ {0,3}(=+|-+)[ \t]*$')
CODE_SPAN = re.compile(r'(`+)(.+?)\1', re.S)
INLINE = re.compile(r'!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)'
                    r'(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
REFDEF = re.compile(r'^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)')
HTML_ANCHOR = re.compile(r'<a\s[^>]*\b(?:name|id)\s*=\s*["\']([^"\']+)["\']', re.I)
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
LINE_ANCHOR = re.compile(r'^L\d+(-L\d+)?$')


def prose_lines(text):
    """Yields (line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split('\n'), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


def heading_text(raw):
    """The rendered text of a heading's Markdown (what GitHub slugs)."""
    t = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    t = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', t)
    t = re.sub(r'<[^>]+>', '', t)
    t = re.sub(r'(\*+|(?<!\w)_+|_+(?!\w))', '', t)
    return t.strip()


def slug(text):
    s = heading_text(text).lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(text):
    """Every anchor a Markdown file defines, as GitHub spells them."""
    seen = {}
    out = set()
    prev = None
    for _, line in prose_lines(text):
        raw = None
        m = HEADING.match(line)
        if m:
            raw = m.group(2) or ''
        elif prev and prev.strip() and SETEXT.match(line) and not HEADING.match(prev) \
                and not prev.startswith((' ' * 4, '\t', '|', '- ', '* ')):
            raw = prev.strip()
        if raw is not None:
            base = slug(raw)
            k = seen.get(base, 0)
            out.add(base if k == 0 else '%s-%d' % (base, k))
            seen[base] = k + 1
        out.update(a for a in HTML_ANCHOR.findall(line))
        prev = line
    return out


def links(text):
    """Yields (line number, target) of every link outside code."""
    for n, line in prose_lines(text):
        bare = CODE_SPAN.sub(lambda m: ' ' * len(m.group(0)), line)
        for m in INLINE.finditer(bare):
            yield n, m.group(1)
        m = REFDEF.match(bare)
        if m:
            yield n, m.group(1)


class Checker:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.cache = {}

    def anchors_of(self, path):
        if path not in self.cache:
            with open(path, encoding='utf-8', errors='replace') as f:
                self.cache[path] = anchors(f.read())
        return self.cache[path]

    def check_target(self, md, target):
        """None when target resolves from the file md, else the reason."""
        if target.startswith('<') and target.endswith('>'):
            target = target[1:-1]
        if not target or SCHEME.match(target) or target.startswith('//'):
            return None
        path, _, frag = target.partition('#')
        path = urllib.parse.unquote(path)
        if not path:
            dest = md
        elif path.startswith('/'):
            dest = os.path.join(self.root, path.lstrip('/'))
        else:
            dest = os.path.join(os.path.dirname(md), path)
        dest = os.path.normpath(dest)
        if not os.path.exists(dest):
            return 'no such file: %s' % os.path.relpath(dest, self.root)
        if not frag:
            return None
        frag = urllib.parse.unquote(frag)
        if dest.endswith('.md') and os.path.isfile(dest):
            if frag.lower() not in self.anchors_of(dest) and frag not in self.anchors_of(dest):
                return 'no anchor #%s in %s' % (frag, os.path.relpath(dest, self.root))
            return None
        if os.path.isfile(dest) and LINE_ANCHOR.match(frag):
            return None
        return 'anchor #%s on a file that has no headings: %s' % (frag, os.path.relpath(dest, self.root))

    def check_file(self, md):
        """(links checked, [problem lines]) for one Markdown file."""
        with open(md, encoding='utf-8', errors='replace') as f:
            text = f.read()
        count, bad = 0, []
        for n, target in links(text):
            t = target[1:-1] if target.startswith('<') else target
            if not t or SCHEME.match(t) or t.startswith('//'):
                continue
            count += 1
            why = self.check_target(md, target)
            if why:
                bad.append('%s:%d: broken link (%s): %s' % (os.path.relpath(md, self.root), n, target, why))
        return count, bad


def repo_markdown(root):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--cached', '--others',
                              '--exclude-standard', '--', '*.md'],
                             capture_output=True, check=True).stdout.decode()
        files = [f for f in out.split('\0') if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith('.') and x != 'build']
            files += [os.path.relpath(os.path.join(d, x), root) for x in names if x.endswith('.md')]
    return sorted(os.path.join(root, f) for f in files if os.path.isfile(os.path.join(root, f)))


def run(root, files):
    c = Checker(root)
    total, bad = 0, []
    for md in files:
        n, b = c.check_file(md)
        total += n
        bad += b
    for line in bad:
        print(line)
    print('links: %d Markdown files, %d relative links, %d broken' % (len(files), total, len(bad)))
    return 1 if bad else 0


SELF_TEST = {
    'README.md': '# Top\n\n## Install and annotate\n\n## HTTP endpoints (`--listen`)\n\n'
                 '## Repeat\n\n## Repeat\n\nSetext\n------\n\n<a name="explicit"></a>\n\n'
                 '[ok](docs/a.md) [ok](docs/a.md#fast-sync-about-a-second) [ok](#repeat-1)\n'
                 '[ok](#http-endpoints---listen) [ok](#setext) [ok](#explicit) [ok](docs/)\n'
                 '[ok](https://example.com/x.md#nowhere) [ok](<docs/a.md>) ![ok](img.txt#L3)\n'
                 '`[not a link](missing.md)`\n\n```\n[not a link](missing.md)\n# not-a-heading\n```\n'
                 '[bad-file](docs/missing.md)\n[bad-anchor](docs/a.md#nowhere)\n'
                 '[bad-fence-heading](#not-a-heading)\n[bad-repeat](#repeat-2)\n'
                 '[ref]: docs/gone.md\n',
    'docs/a.md': '# A\n\n## Fast sync: about a second\n\n[ok](../README.md#install-and-annotate)\n'
                 '[bad-up](../README.md#install)\n',
    'img.txt': 'x\n',
}


def self_test():
    with tempfile.TemporaryDirectory() as d:
        for name, text in SELF_TEST.items():
            os.makedirs(os.path.join(d, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(d, name), 'w') as f:
                f.write(text)
        c = Checker(d)
        got = []
        for md in ('README.md', 'docs/a.md'):
            got += c.check_file(os.path.join(d, md))[1]
        want = ['README.md:25: broken link (docs/missing.md)',
                'README.md:26: broken link (docs/a.md#nowhere)',
                'README.md:27: broken link (#not-a-heading)',
                'README.md:28: broken link (#repeat-2)',
                'README.md:29: broken link (docs/gone.md)',
                'docs/a.md:6: broken link (../README.md#install)']
        ok = len(got) == len(want) and all(g.startswith(w) for g, w in zip(got, want))
        if not ok:
            print('linkcheck self-test FAILED: expected\n  %s\ngot\n  %s'
                  % ('\n  '.join(want), '\n  '.join(got)))
            return 1
        print('linkcheck self-test: %d bad links found, no good one refused' % len(want))
        return 0


def main(argv):
    args = argv[1:]
    if args == ['--self-test']:
        return self_test()
    root = '.'
    if args[:1] == ['--root']:
        if len(args) < 2:
            print('usage: linkcheck.py [--root DIR] [FILE.md ...] | --self-test', file=sys.stderr)
            return 2
        root, args = args[1], args[2:]
    if any(a.startswith('-') for a in args):
        print('linkcheck.py: unknown option %s' % [a for a in args if a.startswith('-')][0],
              file=sys.stderr)
        return 2
    root = os.path.abspath(root)
    files = [os.path.abspath(a) for a in args] if args else repo_markdown(root)
    return run(root, files)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
