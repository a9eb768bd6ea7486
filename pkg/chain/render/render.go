// Package render writes chain events as text for people: one line per hop (Describe), a timeline with
// offsets and latencies (Render, RenderLine), wrapped to a width, in rayctl's one ANSI palette (pkg/ansi).
package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/ansi"
	"github.com/rayctl/rayctl/pkg/chain"
)

// Options shape the text of a trace.
type Options struct {
	// Width is the line width to wrap at (80 if 0).
	Width int
	// Color adds ANSI colours (for a terminal).
	Color bool
}

// Describe says in words what one hop did, e.g. "mapped Pod a-head-x → RayCluster a (controller owner)".
func Describe(e *chain.Event) string {
	obj := e.Object.Kind + " " + e.Object.Name
	rv := ""
	if e.Object.ResourceVersion != "" {
		rv = " rv " + e.Object.ResourceVersion
	}
	call := e.Call
	if call == nil {
		call = &chain.Call{}
	}
	switch e.Hop {
	case chain.KubeletWrite:
		return fmt.Sprintf("wrote %s status: %s %s%s", obj, e.Outcome, PodSummary(e.Pod), rv)
	case chain.APIWrite:
		if call.Code >= 300 {
			return fmt.Sprintf("refused %s of %s: %d %s (%s)", e.Outcome, obj, call.Code, e.Error, call.User)
		}
		if len(e.Status) > 0 {
			return fmt.Sprintf("accepted %s of %s%s (%s): %s", e.Outcome, obj, rv, call.User, StatusSummary(e.Status))
		}
		return fmt.Sprintf("accepted %s of %s%s (%s)", e.Outcome, obj, rv, call.User)
	case chain.InformerEvent:
		if e.OldResourceVersion != "" {
			return fmt.Sprintf("informer: %s %s rv %s→%s", e.Outcome, obj, e.OldResourceVersion, e.Object.ResourceVersion)
		}
		return fmt.Sprintf("informer: %s %s%s", e.Outcome, obj, rv)
	case chain.PredicateHop:
		return fmt.Sprintf("predicate %q %s %s", e.Predicate, e.Outcome, obj)
	case chain.MapHop:
		return fmt.Sprintf("mapped %s → %s %s (%s)", obj, e.To.Kind, e.To.Name, e.Reason)
	case chain.MapMiss:
		return fmt.Sprintf("not mapped: %s: %s", obj, e.Reason)
	case chain.EnqueueHop:
		switch e.Outcome {
		case chain.EnqueueRequeueAfter:
			return fmt.Sprintf("requeued %s after %s (RequeueAfter)", obj, e.Duration)
		case chain.EnqueueRateLimited:
			return fmt.Sprintf("requeued %s with back-off %s (after an error)", obj, e.Duration)
		case chain.EnqueueCoalesced:
			return fmt.Sprintf("queued %s: coalesced with the pending key", obj)
		case chain.EnqueueAdvanced:
			return fmt.Sprintf("queued %s: made a delayed key ready now", obj)
		}
		return fmt.Sprintf("queued %s (%s)", obj, e.Outcome)
	case chain.DequeueHop:
		return fmt.Sprintf("worker took %s after %s in the queue", obj, ms(e.Duration))
	case chain.ReconcileStart:
		return fmt.Sprintf("Reconcile %s #%d started", obj, e.Reconcile)
	case chain.ReconcileEnd:
		switch e.Outcome {
		case chain.Failed:
			s := fmt.Sprintf("Reconcile %s #%d failed in %s: %s", obj, e.Reconcile, ms(e.Duration), e.Error)
			if note := IgnoredRequeue(e); note != "" {
				s += " (" + note + ")"
			}
			return s
		case chain.RequeueAfter:
			return fmt.Sprintf("Reconcile %s #%d done in %s, requeue after %s", obj, e.Reconcile, ms(e.Duration), requeueAfter(e))
		}
		return fmt.Sprintf("Reconcile %s #%d %s in %s", obj, e.Reconcile, e.Outcome, ms(e.Duration))
	case chain.StatusWrite:
		return fmt.Sprintf("wrote %s status: %s%s", obj, StatusSummary(e.Status), rv)
	case chain.ObjectWrite:
		return fmt.Sprintf("%s %s%s", pastTense(string(e.Outcome)), obj, rv)
	case chain.Transition:
		from, to := "", string(e.Outcome)
		if e.Change != nil {
			from, to = e.Change.From, e.Change.To
		}
		return fmt.Sprintf("%s moved %s → %s", obj, from, to)
	case chain.DashboardCall:
		if e.Error != "" {
			return fmt.Sprintf("dashboard %s %s failed after %s: %s", call.Method, call.URL, ms(e.Duration), e.Error)
		}
		return fmt.Sprintf("dashboard %s %s → %d in %s", call.Method, call.URL, call.Code, ms(e.Duration))
	case chain.APIRead:
		where := "in all namespaces"
		if e.Object.Namespace != "" {
			where = "in namespace " + e.Object.Namespace
		}
		what := "opened a watch of"
		if e.Outcome == chain.List {
			what = "listed"
		}
		if call.Code >= 300 {
			return fmt.Sprintf("refused %s %ss %s: %d %s (%s)", e.Outcome, e.Object.Kind, where, call.Code, e.Error, call.User)
		}
		return fmt.Sprintf("%s %ss %s (%s)", what, e.Object.Kind, where, call.User)
	case chain.WatchDelivery:
		agent := ""
		if call.UserAgent != "" {
			agent = ", " + call.UserAgent
		}
		return fmt.Sprintf("delivered %s of %s%s to the watch of %s%s", e.Outcome, obj, rv, call.User, agent)
	case chain.ProxyCall:
		return fmt.Sprintf("proxied %s %s to %s → %d in %s (%s)", call.Method, call.Path, obj, call.Code, ms(e.Duration), call.User)
	}
	return string(e.Hop) + " " + obj
}

// PodSummary is a kubelet write in words: "Ready=True", then the containers that are not running and
// ready ("ray-head=ContainerCreating", "worker=running,not-ready").
func PodSummary(p *chain.PodStatus) string {
	if p == nil {
		return "Ready=Unknown"
	}
	var b strings.Builder
	b.WriteString("Ready=" + p.Ready)
	for _, c := range p.Containers {
		if c.State == chain.Running {
			b.WriteString(" " + c.Name + "=running,not-ready")
		} else {
			b.WriteString(" " + c.Name + "=" + c.Reason)
		}
	}
	return b.String()
}

// StatusSummary is a status write's fields in words: "state=ready readyWorkers=1/1".
func StatusSummary(fields []chain.Field) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.Name + "=" + f.Value
	}
	return strings.Join(parts, " ")
}

// IgnoredRequeue says, for a failed Reconcile that also asked for a RequeueAfter, that it was not
// used; "" otherwise.
func IgnoredRequeue(e *chain.Event) string {
	if e.Result == nil || !e.Result.RequeueAfterIgnored {
		return ""
	}
	return fmt.Sprintf("RequeueAfter %s ignored: an error goes to the rate limiter", e.Result.RequeueAfter)
}

// requeueAfter is the delay a Reconcile asked for.
func requeueAfter(e *chain.Event) time.Duration {
	if e.Result == nil {
		return 0
	}
	return e.Result.RequeueAfter
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
func Render(w io.Writer, steps []chain.Step, opts Options) {
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
		if s.Unseen != "" {
			RenderUnseen(w, s.Unseen, opts)
		}
		RenderLine(w, time.Duration(s.At-t0), latency, &s.Event, opts)
	}
}

// RenderLine writes one hop at offset (with its latency, "" for none).
func RenderLine(w io.Writer, offset time.Duration, latency string, e *chain.Event, opts Options) {
	if opts.Width <= 0 {
		opts.Width = 80
	}
	prefix := fmt.Sprintf("%10s %9s  %-11s ", "+"+ms(offset), latency, e.Component)
	text := Describe(e)
	lines := Wrap(text, opts.Width-len(prefix))
	color := ""
	if opts.Color {
		switch {
		case e.Error != "" || e.Hop == chain.MapMiss || e.Outcome == chain.Dropped || (e.Call != nil && e.Call.Code >= 400):
			color = ansi.Red
		case e.Hop == chain.KubeletWrite || e.Hop == chain.StatusWrite || e.Hop == chain.ObjectWrite || e.Hop == chain.Transition || e.Hop == chain.DashboardCall:
			color = ansi.Green
		case e.Hop == chain.ReconcileStart || e.Hop == chain.ReconcileEnd:
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

// RenderUnseen writes a note between hops about what happened out of the API server's sight (an
// operator's cache, queue and reconcile), dimmed and marked ┆.
func RenderUnseen(w io.Writer, note string, opts Options) {
	if opts.Width <= 0 {
		opts.Width = 80
	}
	indent := strings.Repeat(" ", 22) + "┆ "
	for _, l := range Wrap(note, opts.Width-len([]rune(indent))) {
		fmt.Fprintln(w, ansi.Paint(opts.Color, ansi.Dim, indent+l))
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
