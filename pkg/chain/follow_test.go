package chain

import (
	"context"
	"testing"
)

// A follow sees what the recorder kept, then each new event once, in order.
func TestTailListsThenFollows(t *testing.T) {
	r := New(10)
	r.Record(Event{Hop: MapHop, Object: Ref{Kind: "Pod", Name: "a"}})
	r.Record(Event{Hop: MapHop, Object: Ref{Kind: "Pod", Name: "b"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed, err := Tail(ctx, r.Source(), Filter{Name: "b"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(feed.List.Events) != 1 || feed.List.Events[0].Seq != 2 || feed.List.Next != 3 || feed.List.Size != 10 {
		t.Fatalf("list: %+v", feed.List)
	}
	r.Record(Event{Hop: MapHop, Object: Ref{Kind: "Pod", Name: "a"}})
	r.Record(Event{Hop: MapHop, Object: Ref{Kind: "Pod", Name: "b"}})
	if e := <-feed.C; e.Seq != 4 || e.Object.Name != "b" {
		t.Fatalf("followed %+v, want seq 4 of b", e)
	}
	cancel()
	if err := <-feed.Err; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestWindowKeepsTheNewest(t *testing.T) {
	var w Window
	for seq := uint64(1); seq <= 7; seq++ {
		w.Add(3, Event{Seq: seq})
	}
	// The seventh event passed twice the size (6): the newest three stay.
	if got := seqs(w.Events()); len(got) != 3 || got[0] != 5 || got[2] != 7 {
		t.Fatalf("window: %v", got)
	}
	w.Add(3, Event{Seq: 8})
	if got := seqs(w.Events()); len(got) != 4 || got[3] != 8 {
		t.Fatalf("window after one more: %v", got)
	}
}

func seqs(events []Event) []uint64 {
	out := make([]uint64, len(events))
	for i := range events {
		out[i] = events[i].Seq
	}
	return out
}
