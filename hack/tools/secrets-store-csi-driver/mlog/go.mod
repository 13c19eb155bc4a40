// The few functions of monis.app/mlog that the driver calls, over klog: the module proxy
// does not serve monis.app/mlog, so go.mod replaces it with this directory.
module monis.app/mlog

go 1.24

require k8s.io/klog/v2 v2.90.1
