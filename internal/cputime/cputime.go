// Package cputime reads the CPU time a process has used, for benchmarks that report work per CPU
// second (steadier than per wall second on a busy machine). Unix reads getrusage(RUSAGE_SELF);
// Windows reads GetProcessTimes of the current process.
package cputime
