package weave

import "strings"

// demote pushes a body's headings below the block's own (#, ## and ### are
// taken by the title, the sections and the records), so a body can never
// open what looks like a new section. ATX headings gain three '#', capped
// at six; a one-line setext heading that starts a paragraph becomes the
// ATX heading of the same demoted level. Lines inside fenced code are left
// alone: a '#' there is a comment or a shell prompt, not a heading. A fence
// left open is closed at the end of the body.
func demote(body string) string {
	lines := strings.Split(body, "\n")
	out := make([]string, 0, len(lines))
	var fence byte // '`' or '~' while inside a fenced block
	var fenceLen int
	fresh := true // no paragraph is open: the next text line would start one
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence != 0 {
			if closesFence(line, fence, fenceLen) {
				fence, fresh = 0, true
			}
			out = append(out, line)
			continue
		}
		if c, n, ok := opensFence(line); ok {
			fence, fenceLen = c, n
			out = append(out, line)
			continue
		}
		if indent, level, rest, ok := atxHeading(line); ok {
			out = append(out, indent+strings.Repeat("#", min(level+3, 6))+rest)
			fresh = true
			continue
		}
		if fresh && i+1 < len(lines) && plainLine(line) {
			if level := setextUnderline(lines[i+1]); level > 0 {
				out = append(out, strings.Repeat("#", level+3)+" "+strings.TrimSpace(line))
				i++ // the underline is now part of the heading
				continue
			}
		}
		out = append(out, line)
		fresh = strings.TrimSpace(line) == ""
	}
	if fence != 0 {
		// Close what the body left open, or the rest of the block, every
		// later record included, would read as code.
		out = append(out, strings.Repeat(string(fence), fenceLen))
	}
	return strings.Join(out, "\n")
}

// indent splits off up to three leading spaces, the most CommonMark allows
// before a heading or fence; ok is false for four or more (an indented code
// block).
func indent(line string) (lead, rest string, ok bool) {
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	if n > 3 {
		return "", line, false
	}
	return line[:n], line[n:], true
}

// atxHeading recognises "# title" to "###### title" (and a bare "#").
func atxHeading(line string) (lead string, level int, rest string, ok bool) {
	lead, s, ok := indent(line)
	if !ok {
		return "", 0, "", false
	}
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(s) && s[n] != ' ' && s[n] != '\t') {
		return "", 0, "", false
	}
	return lead, n, s[n:], true
}

// opensFence recognises ``` or ~~~ (three or more) opening a fenced block.
func opensFence(line string) (c byte, n int, ok bool) {
	_, s, ok := indent(line)
	if !ok || len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return 0, 0, false
	}
	c = s[0]
	for n < len(s) && s[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.ContainsRune(s[n:], '`')) {
		return 0, 0, false
	}
	return c, n, true
}

// closesFence reports whether line closes a fence opened with n c's.
func closesFence(line string, c byte, n int) bool {
	_, s, ok := indent(line)
	if !ok {
		return false
	}
	m := 0
	for m < len(s) && s[m] == c {
		m++
	}
	return m >= n && strings.TrimSpace(s[m:]) == ""
}

// setextUnderline returns 1 for a line of '=', 2 for a line of '-', else 0.
func setextUnderline(line string) int {
	_, s, ok := indent(line)
	s = strings.TrimRight(s, " \t")
	if !ok || s == "" {
		return 0
	}
	if strings.Trim(s, "=") == "" {
		return 1
	}
	if strings.Trim(s, "-") == "" {
		return 2
	}
	return 0
}

// plainLine reports whether line can only be paragraph text, so an
// underline below it makes a setext heading rather than, say, a list item
// followed by a rule or the delimiter row of a table.
func plainLine(line string) bool {
	_, s, ok := indent(line)
	if !ok || strings.TrimSpace(s) == "" {
		return false
	}
	switch s[0] {
	case '#', '>', '|', '<':
		return false
	case '-', '*', '+':
		if len(s) == 1 || s[1] == ' ' || s[1] == '\t' {
			return false
		}
		if setextUnderline(s) > 0 || strings.Trim(s, "*_ ") == "" {
			return false // a thematic break
		}
	}
	// An ordered list item: digits then '.' or ')' then a space.
	d := 0
	for d < len(s) && d < 9 && s[d] >= '0' && s[d] <= '9' {
		d++
	}
	if d > 0 && d < len(s) && (s[d] == '.' || s[d] == ')') && (d+1 == len(s) || s[d+1] == ' ' || s[d+1] == '\t') {
		return false
	}
	return true
}
