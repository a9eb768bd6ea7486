package expectations

import (
	"errors"
	"testing"
	"time"
)

type fakeCache map[string]bool

func (c fakeCache) has(name string) (bool, error) { return c[name], nil }

func TestCreateWaitsForTheCache(t *testing.T) {
	e := New(time.Minute)
	g := Group{"ns", "c", "workers"}
	cache := fakeCache{}
	e.Expect(g, "w-1", Create)
	if e.Satisfied(g, cache.has) {
		t.Fatal("satisfied before the cache saw the created pod")
	}
	cache["w-1"] = true
	if !e.Satisfied(g, cache.has) {
		t.Fatal("not satisfied once the cache has the pod")
	}
	if e.Len() != 0 {
		t.Fatalf("met expectation kept: %d", e.Len())
	}
}

func TestDeleteWaitsForTheCache(t *testing.T) {
	e := New(time.Minute)
	g := Group{"ns", "c", "workers"}
	cache := fakeCache{"w-1": true}
	e.Expect(g, "w-1", Delete)
	if e.Satisfied(g, cache.has) {
		t.Fatal("satisfied while the deleted pod is still cached")
	}
	delete(cache, "w-1")
	if !e.Satisfied(g, cache.has) {
		t.Fatal("not satisfied after the pod left the cache")
	}
}

func TestGroupsAreIndependent(t *testing.T) {
	e := New(time.Minute)
	a, b := Group{"ns", "c", "a"}, Group{"ns", "c", "b"}
	e.Expect(a, "p", Create)
	if !e.Satisfied(b, fakeCache{}.has) {
		t.Fatal("group b blocked by group a")
	}
	if e.Satisfied(a, fakeCache{}.has) {
		t.Fatal("group a satisfied")
	}
}

func TestExpiry(t *testing.T) {
	e := New(time.Second)
	now := time.Unix(1000, 0)
	e.now = func() time.Time { return now }
	g := Group{"ns", "c", "workers"}
	e.Expect(g, "gone-before-seen", Create)
	if e.Satisfied(g, fakeCache{}.has) {
		t.Fatal("satisfied before expiry")
	}
	now = now.Add(2 * time.Second)
	if !e.Satisfied(g, fakeCache{}.has) {
		t.Fatal("an expired expectation still blocks")
	}
}

func TestLookupErrorKeepsPending(t *testing.T) {
	e := New(time.Minute)
	g := Group{"ns", "c", "workers"}
	e.Expect(g, "p", Delete)
	if e.Satisfied(g, func(string) (bool, error) { return false, errors.New("cache down") }) {
		t.Fatal("satisfied on a lookup error")
	}
	if e.Len() != 1 {
		t.Fatal("expectation dropped on a lookup error")
	}
}

func TestForget(t *testing.T) {
	e := New(time.Minute)
	e.Expect(Group{"ns", "c", "a"}, "p", Create)
	e.Expect(Group{"ns", "c", ""}, "h", Create)
	e.Expect(Group{"ns", "other", "a"}, "q", Create)
	e.Forget("ns", "c")
	if e.Len() != 1 {
		t.Fatalf("want only the other cluster's expectation left, have %d", e.Len())
	}
}
