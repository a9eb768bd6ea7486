package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultQuotaBytes is etcd's own database quota, used when Config.QuotaBackendBytes is 0.
const DefaultQuotaBytes = 2 << 30

// When etcd's database reaches its quota, etcd raises its NOSPACE alarm and refuses every write that
// would add data (deletes still pass) with "etcdserver: mvcc: database space exceeded", which the API
// server passes on as an unexplained error 500. Two pieces make that usable:
//
//   - noSpaceMessage replaces etcd's text, on every client's request, with one that says what the
//     quota is and what to do;
//   - guardSpace, while the alarm is raised, compacts away old revisions and defragments the database
//     whenever that frees space, and disarms the alarm once the data fits again under the quota with
//     room to spare (recoverBelow of it), so writes succeed again after objects are deleted.

// recoverBelow is the fraction of the quota the database must be under for the alarm to be disarmed.
const recoverBelow = 0.9

// NoSpaceMessage is what clients are told when etcd's database is over its quota of quota bytes.
func NoSpaceMessage(quota int64) string {
	return fmt.Sprintf("rayctl's etcd is out of space: its database reached its quota of %s (rayctl up --etcd-quota-bytes). "+
		"Delete objects you no longer need: rayctl then compacts and defragments etcd and accepts writes again once its data "+
		"is under %.0f%% of the quota. Or restart rayctl up with a larger --etcd-quota-bytes",
		mib(quota), recoverBelow*100)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// noSpaceMessage is a gRPC server option that gives etcd's "database space exceeded" errors msg as
// their text (the code stays ResourceExhausted).
func noSpaceMessage(msg string) grpc.ServerOption {
	noSpace := rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace)
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil && rpctypes.ErrorDesc(err) == noSpace {
			return resp, status.Error(codes.ResourceExhausted, msg)
		}
		return resp, err
	})
}

// guardSpace runs until ctx ends: every interval, if etcd's NOSPACE alarm is raised, it frees what it
// can and disarms the alarm once the database is under recoverBelow of quota.
func guardSpace(ctx context.Context, e *embed.Etcd, quota int64, interval time.Duration, lg *zap.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var st reclaimState
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.Server.StopNotify():
			return
		case <-t.C:
		}
		if !noSpaceRaised(e) {
			continue
		}
		if err := reclaim(ctx, e, quota, &st, lg); err != nil && ctx.Err() == nil {
			lg.Warn("reclaiming etcd space", zap.Error(err))
		}
	}
}

func noSpaceRaised(e *embed.Etcd) bool {
	for _, a := range e.Server.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

// reclaimState is what reclaim remembers between calls.
type reclaimState struct {
	// compacted is the revision last compacted to.
	compacted int64
	// lastDefrag is when the database was last defragmented; wait how long to leave it before
	// defragmenting again without a visible gain.
	lastDefrag time.Time
	wait       time.Duration
}

// Defragmenting again without a visible gain starts redefragAfter after the last one and backs off
// to redefragMax: etcd counts pages freed while an older read transaction is open as still in use,
// and a compaction finishes in the background, so the free-space estimate may lag; a defragmentation
// copies only live data and gives the true size, but blocks etcd while it runs.
const (
	redefragAfter = 5 * time.Second
	redefragMax   = 2 * time.Minute
)

// reclaim compacts to the current revision (once per revision, without waiting for the compaction's
// deletes, which etcd does not let a context interrupt), defragments when that leaves at least a tenth
// of the quota free inside the file or, failing a visible gain, when the last defragmentation is old
// enough, and disarms the alarm when the database fits. etcd refuses writes while the file's size plus
// the write exceeds the quota, alarm or not, so only a defragmentation lets writes in again.
func reclaim(ctx context.Context, e *embed.Etcd, quota int64, st *reclaimState, lg *zap.Logger) error {
	be := e.Server.Backend()
	if rev := e.Server.KV().Rev(); rev > st.compacted {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := e.Server.Compact(cctx, &pb.CompactionRequest{Revision: rev})
		cancel()
		if err != nil && !errors.Is(err, mvcc.ErrCompacted) {
			return fmt.Errorf("compacting to revision %d: %w", rev, err)
		}
		lg.Info("compacting etcd to reclaim space", zap.Int64("revision", rev))
		st.compacted = rev
		st.wait = redefragAfter
	}
	if st.wait == 0 {
		st.wait = redefragAfter
	}
	visible := be.Size()-be.SizeInUse() >= quota/10
	due := time.Since(st.lastDefrag) >= st.wait
	if visible || due {
		before := be.Size()
		if err := e.Server.Defragment(); err != nil {
			return fmt.Errorf("defragmenting: %w", err)
		}
		st.lastDefrag = time.Now()
		if before-be.Size() < quota/16 {
			st.wait = min(2*st.wait, redefragMax)
		} else {
			st.wait = redefragAfter
		}
		lg.Info("defragmented etcd to reclaim space", zap.String("before", mib(before)), zap.String("after", mib(be.Size())),
			zap.String("quota", mib(quota)))
	}
	if size := be.Size(); float64(size) >= recoverBelow*float64(quota) {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := e.Server.Alarm(actx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: uint64(e.Server.MemberID()), Alarm: pb.AlarmType_NOSPACE})
	if err != nil {
		return fmt.Errorf("disarming the NOSPACE alarm: %w", err)
	}
	lg.Info("etcd has space again: disarmed its NOSPACE alarm", zap.String("size", mib(be.Size())), zap.String("quota", mib(quota)))
	return nil
}
