package chainhttp

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/chain"
)

// TestClientReadsHandler: the client lists, filters, follows and traces what the handler serves, with
// the typed fields intact.
func TestClientReadsHandler(t *testing.T) {
	rec := chain.New(10)
	rec.Register(chain.ControllerInfo{Name: "rayjob", Kind: "RayJob"}, func() chain.QueueStats { return chain.QueueStats{Concurrency: 1} })
	job := chain.Ref{Kind: "RayJob", Namespace: "ns", Name: "j"}
	rec.Record(chain.Event{Component: "rayjob", Hop: chain.DashboardCall, Object: job, Call: &chain.Call{Method: "POST", Path: "/api/jobs/", Code: 200}})
	rec.Record(chain.Event{Component: "rayjob", Hop: chain.ReconcileEnd, Object: chain.Ref{Kind: "RayJob", Namespace: "other", Name: "k"},
		Outcome: chain.RequeueAfter, Result: &chain.Result{RequeueAfter: time.Second}})
	srv := httptest.NewServer(Handler(rec))
	defer srv.Close()
	c, err := NewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := c.Events(ctx, chain.Filter{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Size != 10 || l.Next != 3 || len(l.Events) != 1 || !l.Events[0].IsCall("POST") || l.Events[0].Call.Path != "/api/jobs/" {
		t.Fatalf("events: %+v", l)
	}
	ctrls, err := c.Controllers(ctx)
	if err != nil || len(ctrls) != 1 || ctrls[0].Queue.Concurrency != 1 {
		t.Fatalf("controllers: %+v %v", ctrls, err)
	}
	if _, err := c.Events(ctx, chain.Filter{Namespace: "ns", After: 0, Hop: "x"}); err != nil {
		t.Fatal(err)
	}

	// Follow: the kept event, then one recorded after the watch began.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	got, errc := chain.Stream(wctx, c, chain.Filter{Kind: "rayjob"}, 10)
	if e := <-got; e.Seq != 1 {
		t.Fatalf("first followed event %+v", e)
	}
	if e := <-got; e.Seq != 2 || e.Result == nil || e.Result.RequeueAfter != time.Second {
		t.Fatalf("second followed event %+v", e)
	}
	rec.Record(chain.Event{Component: "rayjob", Hop: chain.Transition, Object: job, Change: &chain.Change{From: "New", To: "Running"}})
	if e := <-got; e.Seq != 3 || e.Change.To != "Running" {
		t.Fatalf("new event %+v", e)
	}
	wcancel()
	<-errc
}
