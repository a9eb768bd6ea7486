package diagnose

import (
	"fmt"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// refIs reports whether r names the object kind namespace/name (kind case-insensitively).
func refIs(r *chain.Ref, kind, ns, name string) bool {
	return r != nil && strings.EqualFold(r.Kind, kind) && r.Namespace == ns && r.Name == name
}

// find returns the events of one component (any if "") and hop about kind namespace/name, oldest first.
func (d *diag) find(component string, hop chain.Hop, kind, ns, name string) []*chain.Event {
	var out []*chain.Event
	for i := range d.in.Events {
		e := &d.in.Events[i]
		if e.Hop == hop && (component == "" || e.Component == component) && refIs(&e.Object, kind, ns, name) {
			out = append(out, e)
		}
	}
	return out
}

// line is one event as evidence: its sequence number, component and what it did.
func line(e *chain.Event) string {
	return fmt.Sprintf("#%d %s: %s", e.Seq, e.Component, render.Describe(e))
}

// callCode is the HTTP status of a call (0 without one).
func callCode(e *chain.Event) int {
	if e.Call == nil {
		return 0
	}
	return e.Call.Code
}

// callText is a dashboard call as "METHOD URL".
func callText(e *chain.Event) string {
	if e.Call == nil {
		return ""
	}
	return e.Call.Method + " " + e.Call.URL
}

// ms prints a duration in milliseconds, or from 1 s up as a Go duration ("2s", "1m30s").
func ms(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// between is how long after a event b was recorded.
func between(a, b *chain.Event) time.Duration { return time.Duration(b.Mono - a.Mono) }

// pass is one reconcile of a key: from its start to its end, and what the controller did with the
// key afterwards (its own requeue: after an error the rate limiter's back-off, else RequeueAfter).
type pass struct {
	start, end, requeue *chain.Event
}

// passes returns the reconciles of the key kind namespace/name by controller, oldest first.
func (d *diag) passes(controller, kind, ns, name string) []*pass {
	var out []*pass
	byID := map[uint64]*pass{}
	var last *pass
	for i := range d.in.Events {
		e := &d.in.Events[i]
		if e.Component != controller || !refIs(&e.Object, kind, ns, name) {
			continue
		}
		switch e.Hop {
		case chain.ReconcileStart:
			p := &pass{start: e}
			out = append(out, p)
			if e.Reconcile != 0 {
				byID[e.Reconcile] = p
			}
			last = p
		case chain.ReconcileEnd:
			p := byID[e.Reconcile]
			if p == nil {
				p = last
			}
			if p != nil && p.end == nil {
				p.end = e
			}
		case chain.EnqueueHop:
			if e.From == nil && last != nil && last.end != nil && last.requeue == nil {
				last.requeue = e
			}
		}
	}
	return out
}

// change is a write to an object that a controller should react to.
type change struct {
	// write is the write: the API server's record of it, else the kubelet's.
	write *chain.Event
	// seen is the controller's informer event for that version (nil if its cache did not deliver one).
	seen *chain.Event
}

// at is where the change entered the controller: its informer event, else the write.
func (c *change) at() uint64 {
	if c.seen != nil {
		return c.seen.Seq
	}
	return c.write.Seq
}

// what says what the change was, e.g. "kubelet wrote Pod x status: Running Ready=True rv 12".
func (c *change) what() string { return line(c.write) }

// lastChange returns the latest accepted write to any of objs, as controller saw it. Writes for
// which keep returns false are left out (e.g. a controller's own status writes).
func (d *diag) lastChange(controller string, objs []Subject, keep func(e *chain.Event) bool) *change {
	var best *change
	for _, o := range objs {
		var writes []*chain.Event
		apiRV := map[string]bool{}
		for _, e := range d.find("", chain.APIWrite, o.Kind, o.Namespace, o.Name) {
			if callCode(e) >= 300 || (keep != nil && !keep(e)) {
				continue
			}
			writes = append(writes, e)
			apiRV[e.Object.ResourceVersion] = true
		}
		for _, e := range d.find("kubelet", chain.KubeletWrite, o.Kind, o.Namespace, o.Name) {
			if !apiRV[e.Object.ResourceVersion] {
				writes = append(writes, e)
			}
		}
		for _, w := range writes {
			c := &change{write: w}
			if w.Object.ResourceVersion != "" {
				for _, s := range d.find(controller, chain.InformerEvent, o.Kind, o.Namespace, o.Name) {
					if s.Object.ResourceVersion == w.Object.ResourceVersion {
						c.seen = s
						break
					}
				}
			}
			if best == nil || c.at() > best.at() {
				best = c
			}
		}
	}
	return best
}

// after returns what controller did with the informer event e: the predicate, map or miss hops that
// followed it for the same object version (up to the next informer event of that object).
func (d *diag) after(e *chain.Event) []*chain.Event {
	var out []*chain.Event
	started := false
	for i := range d.in.Events {
		x := &d.in.Events[i]
		if x == e {
			started = true
			continue
		}
		if !started || x.Component != e.Component || !refIs(&x.Object, e.Object.Kind, e.Object.Namespace, e.Object.Name) {
			continue
		}
		if x.Hop == chain.InformerEvent {
			break
		}
		if (x.Hop == chain.PredicateHop || x.Hop == chain.MapHop || x.Hop == chain.MapMiss) && x.Object.ResourceVersion == e.Object.ResourceVersion {
			out = append(out, x)
		}
	}
	return out
}

// writer is the API server's record of the write that made version rv of kind namespace/name, if kept.
func (d *diag) writer(kind, ns, name, rv string) *chain.Event {
	if rv == "" {
		return nil
	}
	for _, e := range d.find("apiserver", chain.APIWrite, kind, ns, name) {
		if e.Object.ResourceVersion == rv {
			return e
		}
	}
	return nil
}

// ringNote says what the recorder's events cover, for checks that found none.
func (d *diag) ringNote() string {
	if d.in.ChainError != "" {
		return "the chain recorder could not be read: " + d.in.ChainError
	}
	if d.in.RecorderSize > 0 {
		return fmt.Sprintf("the recorder keeps the newest %d events since rayctl up started", d.in.RecorderSize)
	}
	return "the recorder keeps the newest events since rayctl up started"
}
