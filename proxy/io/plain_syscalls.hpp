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
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <span>

namespace tokengate {

inline ssize_t recvmsg_plain(int socket, msghdr* message, int flags) {
  return ::syscall(SYS_recvmsg, socket, message, flags);
}

// One receive into `data`, with room in `control` for what the socket was
// asked to say about it (TCP_INQ, arrival times), tried again when a signal
// interrupts it. `message` holds that ancillary data afterwards (CMSG_*).
inline ssize_t receive_into(int socket, void* data, std::size_t size, std::span<char> control,
                            int flags, msghdr& message) {
  iovec piece{data, size};
  message = {};
  message.msg_iov = &piece;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  ssize_t got;
  do got = recvmsg_plain(socket, &message, flags);
  while (got < 0 && errno == EINTR);
  message.msg_iov = nullptr;  // (the piece was this call's)
  message.msg_iovlen = 0;
  return got;
}

inline ssize_t sendmsg_plain(int socket, const msghdr* message, int flags) {
  return ::syscall(SYS_sendmsg, socket, message, flags);
}

}  // namespace tokengate
