package chain

import "context"

// EventList is a page of kept events: the answer of Source.Events.
type EventList struct {
	// Size is the ring's capacity; Next the Seq the next event will get.
	Size   int     `json:"size"`
	Next   uint64  `json:"next"`
	Events []Event `json:"events"`
}

// Source is how readers (rayctl trace, diagnose, demo, bench) query and follow a recorder: in-process
// (Recorder.Source) or through the API server (chainhttp.Client).
type Source interface {
	// Events lists the kept events that pass f, oldest first.
	Events(ctx context.Context, f Filter) (*EventList, error)
	// Watch calls fn with each kept event that passes f and then with each new one, until ctx ends
	// (it returns nil then) or fn returns an error.
	Watch(ctx context.Context, f Filter, fn func(Event) error) error
	// Trace returns the causal timeline of one object (see Trace).
	Trace(ctx context.Context, kind, namespace, name string) ([]Step, error)
	// Controllers returns the controllers the recorder knows, with their queues.
	Controllers(ctx context.Context) ([]ControllerInfo, error)
}

// Source returns the recorder as a Source.
func (r *Recorder) Source() Source { return local{r} }

type local struct{ r *Recorder }

func (l local) Events(_ context.Context, f Filter) (*EventList, error) {
	return l.r.List(f), nil
}

func (l local) Watch(ctx context.Context, f Filter, fn func(Event) error) error {
	return l.r.Follow(ctx, f, fn, nil)
}

func (l local) Trace(_ context.Context, kind, namespace, name string) ([]Step, error) {
	return Trace(l.r.Events(Filter{}), kind, namespace, name), nil
}

func (l local) Controllers(context.Context) ([]ControllerInfo, error) { return l.r.Controllers(), nil }

// Follow calls fn with each kept event that passes f and then with each new one as it is recorded,
// until ctx ends (it returns nil then) or fn returns an error. caughtUp (nil for none) is called
// whenever no more events are waiting: a streaming writer flushes there. A reader more than a few
// thousand events behind loses the ones it could not take in time.
func (r *Recorder) Follow(ctx context.Context, f Filter, fn func(Event) error, caughtUp func()) error {
	if caughtUp == nil {
		caughtUp = func() {}
	}
	sub := r.Subscribe(4096)
	defer sub.Close()
	last := f.After
	for _, e := range r.Events(f) {
		if err := fn(e); err != nil {
			return err
		}
		last = e.Seq
	}
	caughtUp()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-sub.C():
			if e.Seq <= last || !f.Match(&e) {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
			if len(sub.C()) == 0 {
				caughtUp()
			}
		}
	}
}

// List returns the kept events that pass f, with the ring's size and the next Seq.
func (r *Recorder) List(f Filter) *EventList {
	next := r.Next()
	return &EventList{Size: r.Size(), Next: next, Events: r.Events(f)}
}

// External reports whether no rayctl controller acts on kind (a RayJob, RayCluster or RayService left
// to an operator outside rayctl, as under rayctl up --controllers=none): its chain is then drawn from
// the API server's side (APITrace). Pods, Services and Jobs are never external: the kubelet writes the
// Pods, and rayctl's own controllers act on the others.
func External(ctx context.Context, src Source, kind string) (bool, error) {
	if kind == KindPod || kind == KindService || kind == KindJob {
		return false, nil
	}
	ctrls, err := src.Controllers(ctx)
	if err != nil {
		return false, err
	}
	for _, ctl := range ctrls {
		if ctl.Kind == kind {
			return false, nil
		}
	}
	return true, nil
}
