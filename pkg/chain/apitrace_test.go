package chain

import (
	"strings"
	"testing"
	"time"
)

func TestAPITraceDrawsTheChainFromTheAPIServersSide(t *testing.T) {
	const op = "kuberay-operator"
	var events []Event
	add := func(e Event) { events = appendAt(events, e) }
	write := func(kind, name, verb, sub, user string, status ...Field) {
		add(Event{Component: "apiserver", Hop: APIWrite, Outcome: Outcome(verb), Object: Ref{Kind: kind, Namespace: "ns", Name: name, ResourceVersion: name + verb},
			Call: &Call{Verb: verb, Subresource: sub, User: user, Code: 200}, Status: status})
	}
	add(Event{Component: "apiserver", Hop: APIRead, Outcome: Watch, Object: Ref{Kind: "Pod"}, Call: &Call{Verb: "watch", User: op}})
	write("RayJob", "job", "create", "", "alice")
	write("RayCluster", "job-abcde", "create", "", op)
	write("RayCluster", "job-abcde", "update", "status", op, F("state", ""))
	add(Event{Component: "kubelet", Hop: KubeletWrite, Object: Ref{Kind: "Pod", Namespace: "ns", Name: "job-abcde-head-x", ResourceVersion: "9"},
		Pod: &PodStatus{Phase: "Running", Ready: "True"}})
	add(Event{Component: "apiserver", Hop: APIWrite, Object: Ref{Kind: "Pod", Namespace: "ns", Name: "job-abcde-head-x", ResourceVersion: "9"},
		Call: &Call{Verb: "patch", Subresource: "status", User: "system:node:vm", Code: 200}})
	write("RayCluster", "job-abcde", "update", "status", op, F("state", "ready"))
	write("RayCluster", "job-abcde", "update", "status", op, F("state", "ready")) // no change: left out
	write("Job", "job", "create", "", op)
	write("Pod", "other-pod", "create", "", "bob") // not related
	for range 3 {
		add(Event{Component: "apiserver", Hop: ProxyCall, Object: Ref{Kind: "Service", Namespace: "ns", Name: "job-abcde-head-svc:dashboard"},
			Call: &Call{Method: "GET", Path: "/api/jobs/x", User: op, Code: 200}})
	}
	write("RayJob", "job", "update", "status", op, F("jobDeploymentStatus", "Complete"), F("jobStatus", "SUCCEEDED"))

	steps := APITrace(events, "RayJob", "ns", "job")
	expectChain(t, steps, func(s *Step) string { return string(s.Hop) + " " + s.Object.Name },
		"api-write job", "api-write job-abcde", "api-write job-abcde", "kubelet-write job-abcde-head-x", "api-write job-abcde",
		"api-write job", "api-proxy job-abcde-head-svc:dashboard", "api-proxy job-abcde-head-svc:dashboard", "api-write job")
	if u := steps[1].Unseen; !strings.Contains(u, op+": the watch event's delivery") {
		t.Errorf("the operator's first hop after alice's write: unseen %q", u)
	}
	if u := steps[4].Unseen; !strings.Contains(u, "it watches Pods in all namespaces since") {
		t.Errorf("the operator's hop after the kubelet's write: unseen %q, want the watch that carried it", u)
	}
	if steps[3].Unseen != "" || steps[5].Unseen != "" {
		t.Errorf("unseen notes where the actor did not change: %q, %q", steps[3].Unseen, steps[5].Unseen)
	}
}

func TestAPITraceShowsWatchDeliveries(t *testing.T) {
	const op = "kuberay-operator"
	var events []Event
	add := func(e Event) { events = appendAt(events, e) }
	head := Ref{Kind: "Pod", Namespace: "ns", Name: "c-head-x", ResourceVersion: "5"}
	deliver := func(r Ref, user string) {
		add(Event{Component: "apiserver", Hop: WatchDelivery, Outcome: Update, Object: r, Call: &Call{Verb: "watch", User: user, UserAgent: user + "/v1"}})
	}
	add(Event{Component: "apiserver", Hop: APIWrite, Object: head, Call: &Call{Verb: "create", User: op, Code: 200}})
	deliver(head, "system:node:vm")
	deliver(head, "someone-else")
	ready := head
	ready.ResourceVersion = "9"
	// The kubelet records its write when the answer is back: the watch events may have gone out first.
	add(Event{Component: "apiserver", Hop: APIWrite, Object: ready, Duration: time.Millisecond / 2, Call: &Call{Verb: "patch", Subresource: "status", User: "system:node:vm", Code: 200}})
	deliver(ready, "someone-else")
	deliver(ready, op)
	add(Event{Component: "kubelet", Hop: KubeletWrite, Object: ready, Pod: &PodStatus{Phase: "Running", Ready: "True"}})
	add(Event{Component: "apiserver", Hop: APIWrite, Object: Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "10"},
		Call: &Call{Verb: "update", Subresource: "status", User: op, Code: 200}, Status: []Field{F("state", "ready")}})

	steps := APITrace(events, "RayCluster", "ns", "c")
	expectChain(t, steps, func(s *Step) string {
		who := ""
		if s.Call != nil {
			who = s.Call.User
		}
		return string(s.Hop) + " " + s.Object.Name + " " + who
	}, "api-write c-head-x "+op, "api-deliver c-head-x system:node:vm", "kubelet-write c-head-x ", "api-deliver c-head-x "+op, "api-write c "+op)
	if u := steps[4].Unseen; !strings.HasPrefix(u, op+": its cache, queue and reconcile") {
		t.Errorf("the operator's write after the delivery to it: unseen %q", u)
	}
	if steps[2].Unseen != "" {
		t.Errorf("the kubelet's write: unseen %q", steps[2].Unseen)
	}
}

// TestAPITraceDeliveryOfAnEarlierHop: the next actor may act on a hop before the one just before it
// (a Job the operator created, not its RayJob status write after it).
func TestAPITraceDeliveryOfAnEarlierHop(t *testing.T) {
	const op, kcm = "kuberay-operator", "system:kube-controller-manager"
	var events []Event
	add := func(e Event) { events = appendAt(events, e) }
	job := Ref{Kind: "Job", Namespace: "ns", Name: "j", ResourceVersion: "1"}
	add(Event{Component: "apiserver", Hop: APIWrite, Object: job, Call: &Call{Verb: "create", User: op, Code: 200}})
	add(Event{Component: "apiserver", Hop: APIWrite, Object: Ref{Kind: "RayJob", Namespace: "ns", Name: "j", ResourceVersion: "2"},
		Call: &Call{Verb: "update", Subresource: "status", User: op, Code: 200}, Status: []Field{F("jobDeploymentStatus", "Running")}})
	add(Event{Component: "apiserver", Hop: WatchDelivery, Outcome: Create, Object: job, Call: &Call{Verb: "watch", User: kcm}})
	add(Event{Component: "apiserver", Hop: APIWrite, Object: Ref{Kind: "Pod", Namespace: "ns", Name: "j-abcde", ResourceVersion: "4"},
		Call: &Call{Verb: "create", User: kcm, Code: 200}})
	steps := APITrace(events, "RayJob", "ns", "j")
	if len(steps) != 4 || steps[2].Hop != WatchDelivery || steps[2].Cause != 1 || steps[3].Cause != steps[2].Seq {
		t.Fatalf("steps %+v, want the Job's delivery to %s (caused by its creation) before its Pod's creation", steps, kcm)
	}
}

// expectChain fails the test unless steps, each as show says, are want, each following from the one
// before it.
func expectChain(t *testing.T, steps []Step, show func(s *Step) string, want ...string) {
	t.Helper()
	var got []string
	for i := range steps {
		got = append(got, show(&steps[i]))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].Cause != steps[i-1].Seq {
			t.Errorf("step %d follows from %d, want the step before it (%d)", i, steps[i].Cause, steps[i-1].Seq)
		}
	}
}

// appendAt appends e to events as the next one recorded, a millisecond after the one before.
func appendAt(events []Event, e Event) []Event {
	e.Seq = uint64(len(events) + 1)
	e.Mono = int64(e.Seq) * int64(time.Millisecond)
	e.Time = time.Unix(0, e.Mono)
	return append(events, e)
}

// TestAPITraceNoEchoOfAnActorsOwnWrite: the kubelet's watch gets its own status write back; that is
// not what made it write again.
func TestAPITraceNoEchoOfAnActorsOwnWrite(t *testing.T) {
	const op = "kuberay-operator"
	var events []Event
	add := func(e Event) { events = appendAt(events, e) }
	pod := Ref{Kind: "Pod", Namespace: "ns", Name: "j-abcde", ResourceVersion: "1"}
	add(Event{Component: "kubelet", Hop: KubeletWrite, Object: pod, Pod: &PodStatus{Phase: "Running", Ready: "True"}})
	add(Event{Component: "apiserver", Hop: WatchDelivery, Outcome: Update, Object: pod, Call: &Call{Verb: "watch", User: "system:node:vm"}})
	add(Event{Component: "apiserver", Hop: APIWrite, Object: Ref{Kind: "RayJob", Namespace: "ns", Name: "j", ResourceVersion: "2"},
		Call: &Call{Verb: "update", Subresource: "status", User: op, Code: 200}, Status: []Field{F("jobStatus", "RUNNING")}})
	done := pod
	done.ResourceVersion = "3"
	add(Event{Component: "kubelet", Hop: KubeletWrite, Object: done, Pod: &PodStatus{Phase: "Succeeded", Ready: "False"}})
	for _, s := range APITrace(events, "RayJob", "ns", "j") {
		if s.Hop == WatchDelivery {
			t.Errorf("the trace shows the kubelet's own write delivered back to it: %+v", s)
		}
	}
}
