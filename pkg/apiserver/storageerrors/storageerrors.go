// Package storageerrors gives the storage failures that are the client's doing, or etcd's quota, the 4xx
// or 507 they are, for built-in kinds and custom resources alike: Getter decorates the storage every
// registry gets, and MarkPatch marks the strategic merge patches whose errors it maps.
package storageerrors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// maxStoredObjectBytes is the largest object, as encoded for etcd, that rayctl stores. The API server's
// etcd client sends requests of at most 2 MiB (etcd client's default send limit, which k8s.io/apiserver
// does not change); a write is one transaction holding the object and its key up to three times, for
// which 8 KiB is room enough.
const maxStoredObjectBytes = 2<<20 - 8<<10

// Getter decorates the storage every registry gets, built-in kinds and custom resources alike, so that
// storage failures that are the client's doing, or etcd's quota, get the 4xx or 507 they are instead of
// the 500 an unknown error becomes:
//
//   - a write etcd refuses for want of space (its quota, or a full disk): 507 Insufficient Storage with
//     etcd's message;
//   - an object too large for etcd's requests: 413 at once, before etcd is called (see sizeLimitCodec);
//   - a resourceVersion (of a get, list or watch, or an update's metadata.resourceVersion) that is not
//     a number: 400;
//   - a strategic merge patch whose directives ($patch, $retainKeys, $setElementOrder/…,
//     $deleteFromPrimitiveList/…) do not fit the object, which the patch handler leaves as 500: 400
//     (for requests MarkPatch has marked, in the server's handler chain).
type Getter struct{ generic.RESTOptionsGetter }

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g Getter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	inner := opts.Decorator
	if inner == nil {
		inner = generic.UndecoratedStorage
	}
	opts.Decorator = func(config *storagebackend.ConfigForResource, prefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		sized := *config
		sized.Codec = sizeLimitCodec{Codec: config.Codec, limit: maxStoredObjectBytes}
		s, destroy, err := inner(&sized, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return errorStorage{Interface: s}, destroy, nil
	}
	return opts, nil
}

// errorStorage maps the errors of storage calls as Getter says.
type errorStorage struct{ storage.Interface }

func (s errorStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return storageError(s.Interface.Create(ctx, key, obj, out, ttl))
}

func (s errorStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	update := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		out, ttl, err := tryUpdate(input, res)
		return out, ttl, patchError(ctx, err)
	}
	return storageError(s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, update, cachedExistingObject))
}

func (s errorStorage) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	return storageError(s.Interface.Get(ctx, key, opts, objPtr))
}

func (s errorStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	return storageError(s.Interface.GetList(ctx, key, opts, listObj))
}

func (s errorStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	return w, storageError(err)
}

// storageError returns err as the API error it is when it is out of space (507), an object too large
// for etcd (413) or a resourceVersion that is not one (400); else err unchanged.
func storageError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*tooLargeError); ok {
		return err
	}
	var invalid storage.InvalidError
	if errors.As(err, &invalid) {
		// Its one source is APIObjectVersioner.ParseResourceVersion: a resourceVersion from the client.
		return apierrors.NewBadRequest(fmt.Sprintf("%s (a resourceVersion is a number from an object's or a list's metadata.resourceVersion)",
			invalid.Errs.ToAggregate().Error()))
	}
	var st interface{ GRPCStatus() *grpcstatus.Status }
	msg := err.Error()
	if errors.As(err, &st) && st.GRPCStatus().Code() == codes.ResourceExhausted {
		msg = st.GRPCStatus().Message()
		// The etcd client's own send limit, should an object pass sizeLimitCodec's margin.
		if strings.Contains(msg, "larger than max") {
			return apierrors.NewRequestEntityTooLargeError("the object is too large to store in etcd: " + msg)
		}
	} else if !strings.Contains(msg, "database space exceeded") && !strings.Contains(msg, "out of space") {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInsufficientStorage, Reason: "InsufficientStorage", Message: msg,
	}}
}

// patchError returns an error of a strategic merge patch's update function (set by MarkPatch) that is
// no API error as a 400: apimachinery's strategicpatch reports a patch whose directives ($patch,
// $retainKeys, $setElementOrder/…, $deleteFromPrimitiveList/…) do not fit the object's schema as plain
// errors, of which the patch handler maps only a few. Only errors of the update function come here,
// never those of etcd, which stay what they are.
func patchError(ctx context.Context, err error) error {
	if err == nil || !isStrategicMergePatch(ctx) {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	return apierrors.NewBadRequest("the strategic merge patch cannot be applied to the object: " + err.Error())
}

type strategicMergePatchKey struct{}

// MarkPatch marks the context of a strategic-merge-patch request, for the storage Getter decorates.
func MarkPatch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPatch {
			if mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); mt == string(types.StrategicMergePatchType) {
				req = req.WithContext(context.WithValue(req.Context(), strategicMergePatchKey{}, true))
			}
		}
		next.ServeHTTP(w, req)
	})
}

func isStrategicMergePatch(ctx context.Context) bool {
	v, _ := ctx.Value(strategicMergePatchKey{}).(bool)
	return v
}

// Versioner returns the storage's versioner, whose errors for a resourceVersion that is not a number
// (a client's: etcd's are numbers) are 400s.
func (s errorStorage) Versioner() storage.Versioner { return clientVersioner{s.Interface.Versioner()} }

// clientVersioner answers 400 for a resourceVersion that is not one; the registry's update reads the
// new object's metadata.resourceVersion through it.
type clientVersioner struct{ storage.Versioner }

// ObjectResourceVersion implements storage.Versioner.
func (v clientVersioner) ObjectResourceVersion(obj runtime.Object) (uint64, error) {
	rv, err := v.Versioner.ObjectResourceVersion(obj)
	var num *strconv.NumError
	if err != nil && errors.As(err, &num) {
		return rv, apierrors.NewBadRequest(fmt.Sprintf("metadata.resourceVersion: Invalid value: %q: must be a number from "+
			"an object's metadata.resourceVersion, or empty", num.Num))
	}
	return rv, err
}

// ParseResourceVersion implements storage.Versioner.
func (v clientVersioner) ParseResourceVersion(resourceVersion string) (uint64, error) {
	rv, err := v.Versioner.ParseResourceVersion(resourceVersion)
	return rv, storageError(err)
}

// sizeLimitCodec refuses to encode, for etcd, an object larger than limit, with a 413 that says the
// object's size and the limit (see tooLargeError); etcd's client would refuse the request itself, as a
// gRPC error the API server answers 500 (or, as out of space, 507).
type sizeLimitCodec struct {
	runtime.Codec
	limit int
}

// Encode implements runtime.Encoder.
func (c sizeLimitCodec) Encode(obj runtime.Object, w io.Writer) error {
	cw := &countingWriter{w: w}
	if err := c.Codec.Encode(obj, cw); err != nil {
		return err
	}
	if cw.n > c.limit {
		return &tooLargeError{size: cw.n, limit: c.limit}
	}
	return nil
}

// tooLargeError is an object too large to store. It is a 413 API error, and also reads as the etcd
// client's own refusal ("trying to send message larger than max"), which k8s.io/apiserver's create,
// update and patch handlers (server-side apply excepted) take as their cue to try once more without
// managedFields, as with kube-apiserver: an object too large only because of its managedFields is
// stored without them.
type tooLargeError struct{ size, limit int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the object is too large to store: %s (%d bytes) as stored in etcd, managedFields and annotations included; "+
		"rayctl stores objects of at most %d bytes (etcd's request limit)", mib(e.size), e.size, e.limit)
}

// Status implements apierrors.APIStatus: 413 Request Entity Too Large.
func (e *tooLargeError) Status() metav1.Status {
	return apierrors.NewRequestEntityTooLargeError(e.Error()).Status()
}

// GRPCStatus is the etcd client's error for a request over its limit.
func (e *tooLargeError) GRPCStatus() *grpcstatus.Status {
	return grpcstatus.Newf(codes.ResourceExhausted, "trying to send message larger than max (%d vs. %d): %s", e.size, e.limit, e.Error())
}

func mib(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// countingWriter counts what passes through it to w.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return c.w.Write(p)
}
