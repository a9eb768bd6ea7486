package demo

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// demoMS prints a latency for the demo's columns.
func demoMS(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// demoStream prints the demo's hops as they come: the events of the objects the demo's RayJob owns
// (its name is the prefix of all of theirs), each once what decides whether it is worth a line has
// arrived, with noise left out — predicates that passed or dropped, handlers that mapped an event
// nowhere (and the informer events that led only there), RequeueAfter enqueues, and the periodic
// Reconcile passes a RequeueAfter started that changed nothing.
type demoStream struct {
	out     io.Writer
	ropts   render.Options
	prefix  string
	events  []chain.Event
	arrived map[uint64]time.Time
	// printed and hidden hold the steps decided so far.
	printed map[uint64]bool
	hidden  map[uint64]bool
	t0      int64
}

// demoHold is how long a hop waits for the hops that decide whether it is shown (the handler's
// mapping after an informer event), and demoPassHold how long a Reconcile pass waits for its end.
const (
	demoHold     = 150 * time.Millisecond
	demoPassHold = 5 * time.Second
)

func newDemoStream(out io.Writer, ropts render.Options, prefix string) *demoStream {
	return &demoStream{out: out, ropts: ropts, prefix: prefix, arrived: map[uint64]time.Time{},
		printed: map[uint64]bool{}, hidden: map[uint64]bool{}, t0: -1}
}

// owns reports whether e is about one of the demo's objects.
func (s *demoStream) owns(e *chain.Event) bool {
	for _, r := range []*chain.Ref{&e.Object, e.From, e.To} {
		if r != nil && strings.HasPrefix(r.Name, s.prefix) {
			return true
		}
	}
	return false
}

func (s *demoStream) add(e chain.Event, now time.Time) {
	if !s.owns(&e) {
		return
	}
	s.events = append(s.events, e)
	s.arrived[e.Seq] = now
}

type mapKey struct {
	component, kind, name, rv string
}

// flush prints the steps that can be decided now; final decides every one.
func (s *demoStream) flush(now time.Time, final bool) {
	if len(s.events) == 0 {
		return
	}
	steps := chain.Timeline(s.events)
	bySeq := make(map[uint64]*chain.Step, len(steps))
	passes := map[uint64][]*chain.Step{}
	mapped := map[mapKey]bool{}
	// nextWriter is, for each watch event delivered, who made the next write after it ("" while none
	// has come): a delivery to the identity that wrote next is what it acted on.
	nextWriter := map[uint64]string{}
	writer := ""
	for i := len(steps) - 1; i >= 0; i-- {
		switch st := &steps[i]; {
		case st.Hop == chain.APIWrite && st.Call != nil:
			writer = st.Call.User
		case st.Hop == chain.WatchDelivery:
			nextWriter[st.Seq] = writer
		}
	}
	for i := range steps {
		st := &steps[i]
		bySeq[st.Seq] = st
		if st.Reconcile != 0 {
			passes[st.Reconcile] = append(passes[st.Reconcile], st)
		}
		if st.Hop == chain.MapHop {
			mapped[mapKey{st.Component, st.Object.Kind, st.Object.Name, st.Object.ResourceVersion}] = true
		}
	}
	settled := func(st *chain.Step, hold time.Duration) bool {
		return final || now.Sub(s.arrived[st.Seq]) >= hold
	}
	// decide says whether a step is shown; ok is false while that is not known yet.
	decide := func(st *chain.Step) (show, ok bool) {
		switch st.Hop {
		case chain.PredicateHop, chain.MapMiss:
			return false, true
		case chain.WatchDelivery:
			// Shown when it carried a write to an operator outside rayctl that acted on it next; one to
			// rayctl's controllers shows as their informer hop, one to the kubelet as its status write.
			u := st.Call.User
			if u == ctrlset.Identity || strings.HasPrefix(u, "system:node:") {
				return false, true
			}
			if w := nextWriter[st.Seq]; w != "" {
				return w == u, true
			}
			return false, settled(st, demoHold)
		case chain.EnqueueHop:
			// The mapping says where an event goes; an enqueue is worth a line when it is more than that.
			switch st.Outcome {
			case chain.EnqueueCoalesced, chain.EnqueueRateLimited, chain.EnqueueDelayed:
				return true, settled(st, demoHold)
			}
			return false, true
		case chain.InformerEvent:
			if mapped[mapKey{st.Component, st.Object.Kind, st.Object.Name, st.Object.ResourceVersion}] {
				return true, settled(st, demoHold)
			}
			return false, settled(st, demoHold)
		}
		if st.Reconcile == 0 {
			return true, settled(st, demoHold)
		}
		// A Reconcile pass is decided as a whole, once it has ended.
		var dequeue *chain.Step
		ended, busy := false, false
		for _, p := range passes[st.Reconcile] {
			switch p.Hop {
			case chain.DequeueHop:
				dequeue = p
			case chain.ReconcileEnd:
				ended = true
				busy = busy || p.Outcome == chain.Failed
			case chain.StatusWrite, chain.Transition, chain.DashboardCall:
				busy = true
			}
		}
		if !ended && !settled(st, demoPassHold) {
			return false, false
		}
		timer := dequeue == nil || dequeue.Cause == 0
		if dequeue != nil {
			if c := bySeq[dequeue.Cause]; c != nil && c.Hop == chain.EnqueueHop && c.From == nil {
				timer = true
			}
		}
		if ended && !busy {
			// A pass that changed nothing: one line (its end) when an event started it, none when
			// its own RequeueAfter did.
			return !timer && st.Hop == chain.ReconcileEnd, true
		}
		return st.Hop != chain.DequeueHop, settled(st, demoHold)
	}
	for i := range steps {
		st := &steps[i]
		if s.printed[st.Seq] || s.hidden[st.Seq] {
			continue
		}
		show, ok := decide(st)
		if !ok {
			// Lines go out in time order: a hop waits for the ones before it.
			break
		}
		if !show {
			s.hidden[st.Seq] = true
			continue
		}
		s.printed[st.Seq] = true
		if s.t0 < 0 {
			s.t0 = st.At
		}
		// The latency runs from the nearest hop before it that was shown.
		latency := ""
		for c, n := bySeq[st.Cause], 0; c != nil && n < 64; c, n = bySeq[c.Cause], n+1 {
			if s.printed[c.Seq] {
				latency = demoMS(time.Duration(max(st.At-c.At, 0)))
				break
			}
		}
		if latency == "" && st.Hop == chain.APIWrite && st.Duration > 0 {
			latency = demoMS(st.Duration)
		}
		e := tidy(st.Event)
		render.RenderLine(s.out, time.Duration(max(st.At-s.t0, 0)), latency, &e, s.ropts)
	}
}

// tidy shortens what makes a line long without saying more on a projector: an optimistic-concurrency
// conflict's full message, other long errors, and a RequeueAfter's nanoseconds.
func tidy(e chain.Event) chain.Event {
	if e.ErrorReason == "Conflict" {
		e.Error = "Conflict: the object has been modified"
	} else {
		e.Error = clip(e.Error, 80)
	}
	if e.Hop == chain.ReconcileEnd && e.Result != nil && e.Result.RequeueAfter > 0 {
		r := *e.Result
		d := r.RequeueAfter
		r.RequeueAfter = d.Round(time.Millisecond)
		if d >= time.Second {
			r.RequeueAfter = d.Round(time.Second / 10)
		}
		e.Result = &r
	}
	return e
}

// hopRow is one line of the latency table.
type hopRow struct {
	label, component string
	latency, total   time.Duration
	root             bool
}

// printHopTable prints the latency of each hop on the causal line that ends at the job's submission
// (its POST to the dashboard; without one, its move to Running), merging the hops that take no time
// of their own (a handler's mapping into its enqueue, the dequeue into the Reconcile's start).
func printHopTable(out io.Writer, st demoStyle, events []chain.Event, ns, name string) {
	anchor := uint64(0)
	what := "job submitted"
	for i := range events {
		e := &events[i]
		if e.Object.Kind != chain.KindRayJob || e.Object.Namespace != ns || e.Object.Name != name {
			continue
		}
		if e.IsCall(http.MethodPost) && e.Error == "" && e.Call.Code < 300 {
			anchor = e.Seq
			break
		}
	}
	if anchor == 0 {
		what = "RayJob Running"
		for i := range events {
			e := &events[i]
			if e.Hop == chain.Transition && e.Outcome == chain.Outcome(rayv1.JobDeploymentStatusRunning) && e.Object.Name == name {
				anchor = e.Seq
				break
			}
		}
	}
	if anchor == 0 {
		fmt.Fprintln(out, "no submission of the job was recorded, so there is no chain to time")
		return
	}
	path := chain.Path(chain.TraceFrom(events, anchor), anchor)
	rows := hopRows(path)
	if len(rows) == 0 {
		return
	}
	from := "the first hop"
	if path[0].Hop == chain.KubeletWrite {
		from = "head Pod Ready"
		if !path[0].Pod.IsReady() {
			from = "Pod status write"
		}
	}
	fmt.Fprintf(out, "%s\n", st.bold(fmt.Sprintf("Hop latencies, %s → %s", from, what)))
	fmt.Fprintln(out, st.dim(fmt.Sprintf("  %-41s %-11s %9s %9s", "hop", "component", "latency", "total")))
	var slowest *hopRow
	for i := range rows {
		r := &rows[i]
		lat, tot := "–", "–"
		if !r.root {
			lat, tot = demoMS(r.latency), demoMS(r.total)
			if slowest == nil || r.latency > slowest.latency {
				slowest = r
			}
		}
		fmt.Fprintf(out, "  %-41s %-11s %9s %9s\n", clip(r.label, 41), r.component, lat, tot)
	}
	total := rows[len(rows)-1].total
	fmt.Fprintf(out, "  %s\n", strings.Repeat("─", 73))
	fmt.Fprintf(out, "  %s → %s: %s over %d hops\n", from, what, st.bold(demoMS(total)), len(rows)-1)
	if slowest != nil && total > 0 {
		fmt.Fprintf(out, "  slowest: %s (%s, %.0f%%)\n", clip(slowest.label, 40), demoMS(slowest.latency), 100*float64(slowest.latency)/float64(total))
	}
}

// hopRows turns a causal path into table rows.
func hopRows(path []chain.Step) []hopRow {
	var rows []hopRow
	if len(path) == 0 {
		return nil
	}
	root := path[0]
	prevAt := root.At
	rows = append(rows, hopRow{label: rootLabel(&root), component: root.Component, root: true})
	add := func(label, component string, at int64) {
		rows = append(rows, hopRow{label: label, component: component, latency: time.Duration(max(at-prevAt, 0)), total: time.Duration(max(at-root.At, 0))})
		prevAt = max(at, prevAt)
	}
	for i := 1; i < len(path); i++ {
		s, prev := &path[i], &path[i-1]
		switch s.Hop {
		case chain.MapHop, chain.DequeueHop:
			// Folded into the enqueue and the Reconcile start that follow.
			if i+1 < len(path) {
				continue
			}
			add(string(s.Hop), s.Component, s.At)
		case chain.APIWrite:
			switch prev.Hop {
			case chain.KubeletWrite:
				add("kubelet → API accepted ("+s.Object.Kind+" status)", s.Component, s.At)
			case chain.StatusWrite:
				add("status write → API accepted ("+s.Object.Kind+")", s.Component, s.At)
			default:
				add("API accepted "+string(s.Outcome)+" "+s.Object.Kind, s.Component, s.At)
			}
		case chain.InformerEvent:
			add(fmt.Sprintf("API → %s informer (%s %s)", s.Component, s.Object.Kind, s.Outcome), s.Component, s.At)
		case chain.EnqueueHop:
			if s.From == nil {
				add("requeued "+s.Object.Kind+" ("+string(s.Outcome)+")", s.Component, s.At)
			} else {
				add("informer → enqueue ("+s.Object.Kind+")", s.Component, s.At)
			}
		case chain.ReconcileStart:
			add("queue wait → Reconcile "+s.Object.Kind, s.Component, s.At)
		case chain.StatusWrite:
			add("Reconcile → status write ("+statusValue(s.Status)+")", s.Component, s.At)
		case chain.Transition:
			add("Reconcile → "+s.Object.Kind+" "+string(s.Outcome), s.Component, s.At)
		case chain.DashboardCall:
			call := s.Call
			if call == nil {
				call = &chain.Call{}
			}
			sent := s.At - int64(s.Duration)
			add("Reconcile → "+call.Method+" "+call.Path+" sent", s.Component, sent)
			add(fmt.Sprintf("%s latency (%d)", call.Method, call.Code), s.Component, s.At)
		case chain.ReconcileEnd:
			add("Reconcile "+s.Object.Kind+" ended ("+string(s.Outcome)+")", s.Component, s.At)
		default:
			add(string(s.Hop)+" "+s.Object.Kind, s.Component, s.At)
		}
	}
	return rows
}

// rootLabel names the hop a path starts at.
func rootLabel(s *chain.Step) string {
	switch s.Hop {
	case chain.KubeletWrite:
		ready := "Ready=False"
		if s.Pod.IsReady() {
			ready = "Ready=True"
		}
		return "kubelet wrote " + s.Object.Kind + " status (" + ready + ")"
	case chain.APIWrite:
		return "API accepted " + string(s.Outcome) + " " + s.Object.Kind
	}
	return render.Describe(&s.Event)
}

// statusValue shortens a status summary ("state=ready readyWorkers=1/1",
// "jobDeploymentStatus=Running jobStatus=") to its first value.
func statusValue(summary []chain.Field) string {
	if len(summary) == 0 {
		return "status"
	}
	if f := summary[0]; f.Value != "" {
		return f.Value
	}
	return summary[0].Name + "="
}
