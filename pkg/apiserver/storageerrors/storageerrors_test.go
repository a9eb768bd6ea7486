package storageerrors

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func code(err error) int32 {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code
	}
	return 0 // not an API error: the handler answers 500
}

func TestStorageError(t *testing.T) {
	_, parseErr := storage.APIObjectVersioner{}.ParseResourceVersion("abc")
	for _, tc := range []struct {
		name string
		err  error
		want int32
	}{
		{"nil", nil, 0},
		{"resourceVersion not a number", parseErr, http.StatusBadRequest},
		{"etcd quota", grpcstatus.Error(codes.ResourceExhausted, "rayctl's etcd is out of space: ..."), http.StatusInsufficientStorage},
		{"etcd client send limit", grpcstatus.Error(codes.ResourceExhausted, "trying to send message larger than max (3 vs. 2)"), http.StatusRequestEntityTooLarge},
		{"too large at encode", &tooLargeError{size: 3, limit: 2}, http.StatusRequestEntityTooLarge},
		{"etcd unavailable stays a 5xx", grpcstatus.Error(codes.Unavailable, "connection refused"), 0},
		{"unknown storage failure stays a 5xx", errors.New("boom"), 0},
	} {
		if got := code(storageError(tc.err)); got != tc.want {
			t.Errorf("%s: HTTP %d, want %d (%v)", tc.name, got, tc.want, storageError(tc.err))
		}
	}
}

func TestPatchError(t *testing.T) {
	smp := context.WithValue(context.Background(), strategicMergePatchKey{}, true)
	plain := errors.New("unknown patch type: bogus in map: map[$patch:bogus]")
	if got := code(patchError(smp, plain)); got != http.StatusBadRequest {
		t.Errorf("a strategic merge patch's error: HTTP %d, want 400", got)
	}
	if got := code(patchError(context.Background(), plain)); got != 0 {
		t.Errorf("another request's update error: HTTP %d, want it left alone", got)
	}
	invalid := apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), "x", nil)
	if got := code(patchError(smp, invalid)); got != http.StatusUnprocessableEntity {
		t.Errorf("an API error of a strategic merge patch: HTTP %d, want it left as 422", got)
	}
}

func TestSizeLimitCodec(t *testing.T) {
	codec := clientgoscheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion)
	small := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small"}}
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"a": string(bytes.Repeat([]byte("x"), 2000))}}
	c := sizeLimitCodec{Codec: codec, limit: 1000}
	if _, err := runtime.Encode(c, small); err != nil {
		t.Fatalf("encoding a small object: %v", err)
	}
	_, err := runtime.Encode(c, big)
	if code(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("encoding a big object: %v, want a 413", err)
	}
	// k8s.io/apiserver's handlers retry without managedFields on the etcd client's own refusal.
	var g interface{ GRPCStatus() *grpcstatus.Status }
	if !errors.As(err, &g) || g.GRPCStatus().Code() != codes.ResourceExhausted {
		t.Fatalf("%v does not read as the etcd client's refusal", err)
	}
}
