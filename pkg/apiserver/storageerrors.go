package apiserver

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// noSpaceGetter decorates the storage every registry gets so that a write etcd refuses for want of
// space (its quota, or a full disk) is answered 507 Insufficient Storage with etcd's message, rather
// than the 500 an unknown storage error becomes.
type noSpaceGetter struct{ generic.RESTOptionsGetter }

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g noSpaceGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
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
		s, destroy, err := inner(config, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return noSpaceStorage{Interface: s}, destroy, nil
	}
	return opts, nil
}

// noSpaceStorage turns etcd's out-of-space refusals of writes into 507s.
type noSpaceStorage struct{ storage.Interface }

func (s noSpaceStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return noSpace(s.Interface.Create(ctx, key, obj, out, ttl))
}

func (s noSpaceStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return noSpace(s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject))
}

// noSpace returns err as a 507 when it says etcd is out of space, else err unchanged.
func noSpace(err error) error {
	if err == nil {
		return nil
	}
	var st interface{ GRPCStatus() *grpcstatus.Status }
	msg := err.Error()
	if errors.As(err, &st) && st.GRPCStatus().Code() == codes.ResourceExhausted {
		msg = st.GRPCStatus().Message()
	} else if !strings.Contains(msg, "database space exceeded") && !strings.Contains(msg, "out of space") {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInsufficientStorage, Reason: "InsufficientStorage", Message: msg,
	}}
}
