package diagnose

import (
	"fmt"
	"io"
	"strings"

	"github.com/rayctl/rayctl/pkg/ansi"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// TextOptions shape the text of a report.
type TextOptions struct {
	// Width is the column to wrap checks and evidence at (80 if 0); the verdict is one line whatever
	// its length.
	Width int
	// Color marks passes green and failures red (for a terminal).
	Color bool
}

// WriteText writes r for people: a heading, each check under its item with ✓, ✗ or –, what to do
// about a failure, and the evidence; then one line with the most likely cause and what to do.
func WriteText(w io.Writer, r *Report, o TextOptions) {
	if o.Width <= 0 {
		o.Width = 80
	}
	paint := func(code, s string) string { return ansi.Paint(o.Color, code, s) }
	var around []string
	for _, s := range r.Subjects {
		if s != r.Object {
			around = append(around, s.String())
		}
	}
	head := "Diagnosis of " + r.Object.String()
	if len(around) > 0 {
		head += " (with " + strings.Join(around, ", ") + ")"
	}
	for _, l := range render.Wrap(head, o.Width) {
		fmt.Fprintln(w, paint(ansi.Bold, l))
	}
	lastID := ""
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.ID != lastID {
			fmt.Fprintf(w, "%s) %s\n", c.ID, c.Title)
			lastID = c.ID
		}
		mark := c.Status.Symbol()
		switch c.Status {
		case Pass:
			mark = paint(ansi.Green, mark)
		case Fail:
			mark = paint(ansi.Red, mark)
		}
		text := c.Summary
		if c.Subject != r.Object || len(r.Subjects) > 1 {
			who := c.Subject
			if who.Namespace == r.Object.Namespace {
				who.Namespace = ""
			}
			text = who.String() + ": " + text
		}
		for j, l := range render.Wrap(text, o.Width-4) {
			if j == 0 {
				fmt.Fprintf(w, "  %s %s\n", mark, l)
			} else {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		if c.Status == Fail && c.Fix != "" {
			for j, l := range render.Wrap("→ "+c.Fix, o.Width-4) {
				if j > 0 {
					l = "  " + l
				}
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		for _, e := range c.Evidence {
			for j, l := range render.Wrap(e, o.Width-8) {
				prefix := "· "
				if j > 0 {
					prefix = "  "
				}
				fmt.Fprintf(w, "      %s\n", paint(ansi.Dim, prefix+l))
			}
		}
	}
	if r.Verdict.Check == "" {
		fmt.Fprintln(w, paint(ansi.Green, "No cause found: "+r.Verdict.Text))
		return
	}
	fmt.Fprintln(w, paint(ansi.Red, fmt.Sprintf("Most likely cause (%s): %s", r.Verdict.Check, r.Verdict.Text)))
}
