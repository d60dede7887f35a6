// What glibc's wrapper adds to a system call in a process with threads:
// recvmsg(2) through glibc (a cancellation point: the thread's cancel type
// is switched on and off around the call) against the same call through
// syscall(2), alternating, on an empty non-blocking socket (each call fails
// with EAGAIN: the kernel's part is as small as a call gets). On demand, not
// a test:
//   g++ -O2 -pthread tests/bench/syscall_wrapper.cpp -o /tmp/syscall_wrapper && taskset -c 0
//   /tmp/syscall_wrapper
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

int main() {
  std::thread([] {}).join();  // from here glibc treats the process as threaded, as tokengate is
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair) != 0) return 1;
  char bytes[64];
  iovec piece{bytes, sizeof bytes};
  msghdr message{};
  message.msg_iov = &piece;
  message.msg_iovlen = 1;
  constexpr int calls = 2'000'000;
  for (int round = 0; round < 6; ++round) {
    double ns[2];
    for (int direct = 0; direct < 2; ++direct) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) {
        if (direct)
          ::syscall(SYS_recvmsg, pair[0], &message, 0);
        else
          ::recvmsg(pair[0], &message, 0);
      }
      ns[direct] =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
              .count() /
          calls;
    }
    std::printf("recvmsg() %.1f ns, syscall(SYS_recvmsg) %.1f ns: %.1f ns saved per call\n", ns[0],
                ns[1], ns[0] - ns[1]);
  }
}
