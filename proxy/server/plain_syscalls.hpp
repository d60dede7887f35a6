#pragma once
// The relay's two per-event system calls, made without glibc's wrappers.
//
// glibc treats recvmsg and sendmsg as thread cancellation points: once a
// process has a second thread (tokengate always has one per worker), each
// call switches the calling thread's cancel type on before the system call
// and off after it, two atomic compare-exchanges on the thread's descriptor
// per call. tokengate never cancels a thread, so that bookkeeping buys
// nothing, and with two calls per relayed event it is paid a few hundred
// times per stream. syscall(2) makes the same system call with no
// cancellation point around it (same arguments, same return value, errno
// set the same way).
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tokengate {

inline ssize_t recvmsg_plain(int socket, msghdr* message, int flags) {
  return ::syscall(SYS_recvmsg, socket, message, flags);
}

inline ssize_t sendmsg_plain(int socket, const msghdr* message, int flags) {
  return ::syscall(SYS_sendmsg, socket, message, flags);
}

}  // namespace tokengate
