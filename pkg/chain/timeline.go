package chain

// Timeline, TraceFrom and Path serve readers that follow many objects at once (`rayctl demo`): every
// event with its cause, a trace that ends at a chosen hop, and the single line of causes behind a hop.

// Timeline returns every event as a Step, with its primary cause among events and its place in time
// (a write placed where the API server received it, as in Trace), in time order.
func Timeline(events []Event) []Step {
	x := newIndex(events)
	set := make(map[int]bool, len(events))
	for i := range events {
		set[i] = true
	}
	return x.steps(set)
}

// TraceFrom returns the causal timeline that ends at the event numbered seq: that event and every
// cause of every hop on the way back, as Trace does for an object's latest significant hop. It returns
// nil when no event has that Seq.
func TraceFrom(events []Event, seq uint64) []Step {
	x := newIndex(events)
	i, ok := x.bySeq[seq]
	if !ok {
		return nil
	}
	set := map[int]bool{}
	x.back(i, set, 0)
	return x.steps(set)
}

// Path returns the line of primary causes that ends at the step numbered seq, root first: the step,
// its Cause, that step's Cause, and so on until a step has no cause among steps. It returns nil when
// no step has that Seq.
func Path(steps []Step, seq uint64) []Step {
	bySeq := make(map[uint64]int, len(steps))
	for i := range steps {
		bySeq[steps[i].Seq] = i
	}
	i, ok := bySeq[seq]
	if !ok {
		return nil
	}
	var rev []Step
	seen := map[uint64]bool{}
	for {
		s := steps[i]
		if seen[s.Seq] {
			break
		}
		seen[s.Seq] = true
		rev = append(rev, s)
		j, ok := bySeq[s.Cause]
		if s.Cause == 0 || !ok {
			break
		}
		i = j
	}
	out := make([]Step, len(rev))
	for k := range rev {
		out[k] = rev[len(rev)-1-k]
	}
	return out
}
