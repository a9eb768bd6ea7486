package apiserver

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestInternalClientWarnings: the API server's deprecation of v1 Endpoints is not logged for rayctl's
// own clients; any other warning is, as client-go logs it.
func TestInternalClientWarnings(t *testing.T) {
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	defer klog.LogToStderr(true)
	ctx := context.Background()
	InternalClientWarnings.HandleWarningHeaderWithContext(ctx, 299, "-", "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
	InternalClientWarnings.HandleWarningHeaderWithContext(ctx, 299, "-", `unknown field "spec.foo"`)
	klog.Flush()
	out := buf.String()
	if strings.Contains(out, "Endpoints is deprecated") {
		t.Errorf("the Endpoints deprecation was logged:\n%s", out)
	}
	if !strings.Contains(out, `unknown field \"spec.foo\"`) && !strings.Contains(out, `unknown field "spec.foo"`) {
		t.Errorf("another warning was not logged:\n%s", out)
	}
}
