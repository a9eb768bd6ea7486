package chain

import "context"

// Readers that follow the recorder live (rayctl trace --follow, the UI, rayctl demo) share these:
// Stream to follow a Source beside other things to wait for, Tail to list what is kept and follow
// what comes after it, Window to keep the newest events of a long follow.

// Stream follows src in the background for a reader that has other things to wait for: the kept
// events that pass f and then the new ones arrive on the first channel (with room for buffer), and
// Watch's answer on the second once it ends. Cancel ctx to stop it.
func Stream(ctx context.Context, src Source, f Filter, buffer int) (<-chan Event, <-chan error) {
	events := make(chan Event, max(buffer, 1))
	errc := make(chan error, 1)
	go func() {
		errc <- src.Watch(ctx, f, func(e Event) error {
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return events, errc
}

// Feed is a Source being followed (see Tail).
type Feed struct {
	// List is the kept events that passed the filter when the feed opened, with the ring's size and
	// the Seq the next event got.
	List *EventList
	// C delivers the events that pass the filter recorded after List, in order; Err delivers Watch's
	// answer once it ends.
	C   <-chan Event
	Err <-chan error
}

// Tail lists the kept events of src that pass f, then follows the ones recorded after them in the
// background (as Stream does, with room for buffer). Cancel ctx to stop it.
func Tail(ctx context.Context, src Source, f Filter, buffer int) (*Feed, error) {
	list, err := src.Events(ctx, f)
	if err != nil {
		return nil, err
	}
	f.After = max(f.After, list.Next-1)
	c, errc := Stream(ctx, src, f, buffer)
	return &Feed{List: list, C: c, Err: errc}, nil
}

// Batch returns e and the events already waiting on the feed after it: what arrived together.
func (f *Feed) Batch(e Event) []Event {
	batch := []Event{e}
	for len(f.C) > 0 {
		batch = append(batch, <-f.C)
	}
	return batch
}

// Window keeps the newest events of a follow: once it holds more than twice the recorder's size
// it drops all but the newest size, so a long follow stays bounded. The zero Window is empty.
type Window struct {
	events []Event
}

// Add appends events; size is the recorder's ring size (EventList.Size).
func (w *Window) Add(size int, events ...Event) {
	w.events = append(w.events, events...)
	if size = max(size, 1); len(w.events) > 2*size {
		w.events = append([]Event(nil), w.events[len(w.events)-size:]...)
	}
}

// Events returns the kept events, oldest first, for reading (the window does not change them later).
func (w *Window) Events() []Event { return w.events }
