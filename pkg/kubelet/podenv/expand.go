// Package podenv turns a container's spec into what its process sees: the environment (env, envFrom,
// the downward API and resource fields) and the command line with $(VAR) references expanded, by the
// same rules as Kubernetes.
package podenv

import "strings"

// Expand replaces each $(NAME) in s by lookup(NAME) when lookup knows it. As in Kubernetes, "$$" is an
// escaped "$", and a reference to an unknown name, an unterminated "$(" or any other "$" stays as written.
func Expand(s string, lookup func(name string) (string, bool)) string {
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
			continue
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte('$')
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
			continue
		}
		b.WriteByte('$')
	}
	return b.String()
}

// ExpandAll expands every string of list.
func ExpandAll(list []string, lookup func(name string) (string, bool)) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = Expand(s, lookup)
	}
	return out
}
