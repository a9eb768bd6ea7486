package chain

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/ansi"
)

// RenderOptions shape the text of a trace.
type RenderOptions struct {
	// Width is the line width to wrap at (80 if 0).
	Width int
	// Color adds ANSI colours (for a terminal).
	Color bool
}

// Describe says in words what one hop did, e.g. "mapped Pod a-head-x → RayCluster a (controller owner)".
func Describe(e *Event) string {
	obj := e.Object.Kind + " " + e.Object.Name
	rv := ""
	if e.Object.ResourceVersion != "" {
		rv = " rv " + e.Object.ResourceVersion
	}
	switch e.Hop {
	case KubeletWrite:
		return fmt.Sprintf("wrote %s status: %s %s%s", obj, e.Outcome, e.Detail, rv)
	case APIWrite:
		if e.Code >= 300 {
			return fmt.Sprintf("refused %s of %s: %d %s (%s)", e.Outcome, obj, e.Code, e.Error, e.Detail)
		}
		return fmt.Sprintf("accepted %s of %s%s (%s)", e.Outcome, obj, rv, e.Detail)
	case InformerEvent:
		if e.OldResourceVersion != "" {
			return fmt.Sprintf("informer: %s %s rv %s→%s", e.Outcome, obj, e.OldResourceVersion, e.Object.ResourceVersion)
		}
		return fmt.Sprintf("informer: %s %s%s", e.Outcome, obj, rv)
	case PredicateHop:
		return fmt.Sprintf("predicate %q %s %s", e.Detail, e.Outcome, obj)
	case MapHop:
		return fmt.Sprintf("mapped %s → %s %s (%s)", obj, e.To.Kind, e.To.Name, e.Detail)
	case MapMiss:
		return fmt.Sprintf("not mapped: %s: %s", obj, e.Detail)
	case EnqueueHop:
		switch e.Outcome {
		case "requeue-after":
			return fmt.Sprintf("requeued %s after %s (RequeueAfter)", obj, e.Duration)
		case "rate-limited":
			return fmt.Sprintf("requeued %s with back-off %s (after an error)", obj, e.Duration)
		case "coalesced":
			return fmt.Sprintf("queued %s: coalesced with the pending key", obj)
		case "advanced":
			return fmt.Sprintf("queued %s: made a delayed key ready now", obj)
		}
		return fmt.Sprintf("queued %s (%s)", obj, e.Outcome)
	case DequeueHop:
		return fmt.Sprintf("worker took %s after %s in the queue", obj, ms(e.Duration))
	case ReconcileStart:
		return fmt.Sprintf("Reconcile %s #%d started", obj, e.Reconcile)
	case ReconcileEnd:
		switch e.Outcome {
		case "error":
			s := fmt.Sprintf("Reconcile %s #%d failed in %s: %s", obj, e.Reconcile, ms(e.Duration), e.Error)
			if e.Detail != "" {
				s += " (" + e.Detail + ")"
			}
			return s
		case "requeue-after":
			return fmt.Sprintf("Reconcile %s #%d done in %s, requeue after %s", obj, e.Reconcile, ms(e.Duration), e.Detail)
		}
		return fmt.Sprintf("Reconcile %s #%d %s in %s", obj, e.Reconcile, e.Outcome, ms(e.Duration))
	case StatusWrite:
		return fmt.Sprintf("wrote %s status: %s%s", obj, e.Detail, rv)
	case ObjectWrite:
		return fmt.Sprintf("%s %s%s", pastTense(e.Outcome), obj, rv)
	case Transition:
		return fmt.Sprintf("%s moved %s", obj, e.Detail)
	case DashboardCall:
		if e.Error != "" {
			return fmt.Sprintf("dashboard %s failed after %s: %s", e.Detail, ms(e.Duration), e.Error)
		}
		return fmt.Sprintf("dashboard %s → %d in %s", e.Detail, e.Code, ms(e.Duration))
	}
	return string(e.Hop) + " " + obj
}

// pastTense is "created" for "create", "deleted" for "delete".
func pastTense(verb string) string {
	if strings.HasSuffix(verb, "e") {
		return verb + "d"
	}
	return verb + "ed"
}

// ms prints a duration in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// Render writes steps as a timeline, one hop a line: offset from the first hop, the hop's own latency
// (since the hop it followed from), the component and what happened, wrapped to the width.
func Render(w io.Writer, steps []Step, opts RenderOptions) {
	if opts.Width <= 0 {
		opts.Width = 80
	}
	if len(steps) == 0 {
		return
	}
	at := map[uint64]int64{}
	for _, s := range steps {
		at[s.Seq] = s.At
	}
	t0 := steps[0].At
	for i := range steps {
		s := &steps[i]
		latency := ""
		if c, ok := at[s.Cause]; ok && s.Cause != 0 {
			latency = ms(time.Duration(max(s.At-c, 0)))
		}
		RenderLine(w, time.Duration(s.At-t0), latency, &s.Event, opts)
	}
}

// RenderLine writes one hop at offset (with its latency, "" for none).
func RenderLine(w io.Writer, offset time.Duration, latency string, e *Event, opts RenderOptions) {
	if opts.Width <= 0 {
		opts.Width = 80
	}
	prefix := fmt.Sprintf("%10s %9s  %-11s ", "+"+ms(offset), latency, e.Component)
	text := Describe(e)
	lines := Wrap(text, opts.Width-len(prefix))
	color := ""
	if opts.Color {
		switch {
		case e.Error != "" || e.Hop == MapMiss || e.Outcome == "dropped" || (e.Code >= 400):
			color = ansi.Red
		case e.Hop == KubeletWrite || e.Hop == StatusWrite || e.Hop == ObjectWrite || e.Hop == Transition || e.Hop == DashboardCall:
			color = ansi.Green
		case e.Hop == ReconcileStart || e.Hop == ReconcileEnd:
			color = ansi.Cyan
		}
	}
	for i, l := range lines {
		p := prefix
		if i > 0 {
			p = strings.Repeat(" ", len(prefix))
		}
		if opts.Color {
			fmt.Fprintf(w, "%s%s%s%s%s\n", ansi.Dim, p, ansi.Reset, color+l, ansi.Reset)
		} else {
			fmt.Fprintf(w, "%s%s\n", p, l)
		}
	}
}

// Wrap breaks text into lines of at most width runes (20 at least), at spaces where it can.
func Wrap(text string, width int) []string {
	width = max(width, 20)
	var lines []string
	for len([]rune(text)) > width {
		r := []rune(text)
		cut := width
		for i := width; i > width/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		lines = append(lines, strings.TrimRight(string(r[:cut]), " "))
		text = strings.TrimLeft(string(r[cut:]), " ")
	}
	return append(lines, text)
}
