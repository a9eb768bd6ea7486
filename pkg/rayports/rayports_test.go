package rayports

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]bool{"20000": true, "20010": true, "29990": true, "20005": false, "19990": false, "30000": false, "x": false, "": false} {
		if _, ok := Parse(in); ok != want {
			t.Errorf("Parse(%q) ok=%v, want %v", in, ok, want)
		}
	}
	if b := Block(20030); b.Port(GCS) != 20030 || b.Port(Serve) != 20039 || b.String() != "20030" {
		t.Errorf("block 20030: GCS %d Serve %d %q", b.Port(GCS), b.Port(Serve), b)
	}
}

func TestTakeSkipsWhatIsInUseHeldOrTaken(t *testing.T) {
	a := NewAllocator()
	busy := map[int32]bool{20025: true} // a program on the host holds a port of the third block
	a.Free = func(p int32) bool { return !busy[p] }
	now := time.Unix(0, 0)
	a.now = func() time.Time { return now }

	first, err := a.Take(map[Block]bool{20000: true}) // a pod records the first block
	if err != nil || first != 20010 {
		t.Fatalf("first Take = %v, %v; want 20010", first, err)
	}
	second, err := a.Take(nil)
	if err != nil || second != 20000 {
		t.Fatalf("second Take = %v, %v; want 20000 (20010 is held, 20020 has a busy port)", second, err)
	}
	third, _ := a.Take(nil)
	if third != 20030 {
		t.Fatalf("third Take = %v, want 20030", third)
	}
	// Once the hold is over and no pod records them, blocks come back.
	now = now.Add(hold + time.Second)
	if again, _ := a.Take(nil); again != 20000 {
		t.Errorf("after the hold, Take = %v, want 20000", again)
	}
}

func TestTakeFindsAPortHeldOnTheHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(First+int(Metrics)))
	if err != nil {
		t.Skipf("port %d is taken here already: %v", First+int(Metrics), err)
	}
	defer l.Close()
	if b, err := NewAllocator().Take(nil); err != nil || b == First {
		t.Errorf("Take = %v, %v: the first block has a port held by a listener", b, err)
	}
}

func TestHeadKeepsItsBlock(t *testing.T) {
	a := NewAllocator()
	a.Free = func(int32) bool { return true }
	none := func() (map[Block]bool, error) { return nil, nil }
	b, err := a.Head("ns/c", nil, none)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := a.Head("ns/c", nil, none); again != b {
		t.Errorf("the head's block moved: %v then %v", b, again)
	}
	rec := Block(20500)
	if got, _ := a.Head("ns/c", &rec, none); got != rec {
		t.Errorf("a recorded block is not kept: %v", got)
	}
	a.Forget("ns/c")
	if _, err := a.Head("ns/d", nil, func() (map[Block]bool, error) { return nil, errors.New("cache down") }); err == nil {
		t.Error("an error listing blocks in use is not returned")
	}
}

func TestExhausted(t *testing.T) {
	a := NewAllocator()
	a.Free = func(int32) bool { return false }
	if _, err := a.Take(nil); !errors.Is(err, ErrExhausted) {
		t.Errorf("Take with every port busy: %v", err)
	}
}

func TestParams(t *testing.T) {
	head, worker := Params(20000, 20000, true), Params(20010, 20000, false)
	if head["port"] != "20000" || head["dashboard-port"] != "20001" || head["dashboard-host"] != "127.0.0.1" || head["node-ip-address"] != "127.0.0.1" {
		t.Errorf("head params: %v", head)
	}
	if worker["address"] != "127.0.0.1:20000" || worker["metrics-export-port"] != "20013" || worker["port"] != "" {
		t.Errorf("worker params: %v", worker)
	}
}
