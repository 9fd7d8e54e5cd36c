package podspec

import "strings"

// Expand replaces $(NAME) with the value of the container's environment
// variable NAME, as kubelet does in env values, command and args: "$$"
// escapes a "$", and a reference to an unknown variable stays as written.
func Expand(s string, vars map[string]string) string {
	return expandWith(s, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}

// expandWith is Expand with a lookup: a name it does not know stays as
// written.
func expandWith(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
