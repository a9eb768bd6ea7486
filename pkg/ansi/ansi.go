// Package ansi is the one palette of ANSI SGR codes rayctl's text output uses (trace, diagnose, demo),
// for a terminal only.
package ansi

// The codes; Reset ends any of them. They combine by concatenation (Bold + Green).
const (
	Reset = "\x1b[0m"
	Bold  = "\x1b[1m"
	Dim   = "\x1b[2m"
	Red   = "\x1b[31m"
	Green = "\x1b[32m"
	Cyan  = "\x1b[36m"
)

// Paint returns text between code and Reset when on (a terminal), else text as it is.
func Paint(on bool, code, text string) string {
	if !on {
		return text
	}
	return code + text + Reset
}
