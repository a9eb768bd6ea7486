package controlplane

import (
	"flag"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// redirectLogs sends klog (the API server's logs) and a zap logger (etcd's) to w. klog's verbosity is
// $RAYCTL_V.
func redirectLogs(w io.Writer) *zap.Logger {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	_ = fs.Set("v", os.Getenv("RAYCTL_V"))
	// One writer for every severity: with one_output each entry is written once, not once per level.
	_ = fs.Set("one_output", "true")
	klog.SetOutput(w)
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), zap.InfoLevel)
	return zap.New(core)
}
