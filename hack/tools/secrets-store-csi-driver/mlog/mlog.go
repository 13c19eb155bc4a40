// Package mlog stands in for monis.app/mlog in the driver's build: the functions the
// driver calls (its main, its server and its rotation reconciler), each over klog.
package mlog

import (
	"context"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

// LogFormat is the driver's --log-format-json choice; klog's text is used for both.
type LogFormat string

const (
	FormatText LogFormat = "text"
	FormatJSON LogFormat = "json"
)

// Setup returns the function that flushes klog at exit.
func Setup() func() { return klog.Flush }

// ValidateAndSetKlogLevelAndFormatGlobally accepts any level at or above zero.
func ValidateAndSetKlogLevelAndFormatGlobally(_ context.Context, level klog.Level, _ LogFormat) error {
	if level < 0 {
		return fmt.Errorf("invalid log level %d", level)
	}
	return nil
}

// Error logs msg with err.
func Error(msg string, err error, keysAndValues ...interface{}) {
	klog.ErrorS(err, msg, keysAndValues...)
}

// Fatal logs err and exits with status 1.
func Fatal(err error, keysAndValues ...interface{}) {
	klog.ErrorS(err, "fatal", keysAndValues...)
	klog.Flush()
	os.Exit(1)
}
