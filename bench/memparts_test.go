package main

import (
	"os"
	"strings"
	"testing"
)

// TestGoMetricsReadsTheRuntimeClasses parses a /metrics excerpt as the API server writes it.
func TestGoMetricsReadsTheRuntimeClasses(t *testing.T) {
	raw := strings.Join([]string{
		"# HELP go_gc_heap_live_bytes Heap memory occupied by live objects.",
		"# TYPE go_gc_heap_live_bytes gauge",
		"go_gc_heap_live_bytes 1.11567736e+08",
		"# TYPE go_memory_classes_heap_unused_bytes gauge",
		"go_memory_classes_heap_unused_bytes 6.03556e+07",
		"# TYPE go_gc_cycles_total_gc_cycles_total counter",
		"go_gc_cycles_total_gc_cycles_total 39",
		"# TYPE apiserver_request_total counter",
		`apiserver_request_total{code="200",verb="GET"} 12`,
		"",
	}, "\n")
	v, err := goMetrics([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if v["go_gc_heap_live_bytes"] != 111567736 || v["go_memory_classes_heap_unused_bytes"] != 60355600 || v["go_gc_cycles_total_gc_cycles_total"] != 39 {
		t.Errorf("go metrics: %v", v)
	}
	if _, ok := v["apiserver_request_total"]; ok {
		t.Errorf("a non-go metric was read: %v", v)
	}
}

// TestReadSmapsFindsTheBinary reads this test process's own smaps: its binary's pages are resident.
func TestReadSmapsFindsTheBinary(t *testing.T) {
	var m memParts
	if err := m.readSmaps(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Binary <= 0 || m.Binary >= m.RSS {
		t.Errorf("RSS %.1f MB, binary %.1f MB: want 0 < binary < RSS", m.RSS, m.Binary)
	}
	if m.EtcdDB != 0 {
		t.Errorf("etcd database %.1f MB in a process without etcd", m.EtcdDB)
	}
}
