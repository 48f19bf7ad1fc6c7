/* The floor of forza-relay's plain case (issue 16): its system calls and
 * nothing else. Not run by the bench; built and timed by hand with
 * floor.sh beside the C relay (../c_relay.c) to see how far below the C relay
 * the "receive as the wait" design can go on a machine at all. Our own code.
 *
 * What it does per wake-up, as forza-relay does on Linux: recvmmsg(32,
 * MSG_WAITFORONE) on a blocking socket with SO_RCVTIMEO and SO_TIMESTAMPNS,
 * then send() on one connected socket per destination for each datagram.
 * MODE bits take parts away or add forza-relay's clock reads:
 *   1  read CLOCK_REALTIME and CLOCK_MONOTONIC per batch, CLOCK_MONOTONIC
 *      after each send (forza-relay's ages and latencies);
 *   2  no SO_TIMESTAMPNS (no kernel receive time: issue 15 needs it);
 *   4  recvmsg, one datagram a call, instead of recvmmsg.
 *
 * usage: floor LISTEN_PORT RCVBUF_BYTES MODE DEST_PORT...   (all on 127.0.0.1)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_DESTS 16
#define BATCH 32

static char bufs[BATCH][65536];
static struct mmsghdr msgs[BATCH];
static struct iovec iovs[BATCH];
static struct sockaddr_in from[BATCH];
static char control[BATCH][64];

int main(int argc, char **argv) {
    if (argc < 5 || argc - 4 > MAX_DESTS) {
        fprintf(stderr, "usage: %s LISTEN_PORT RCVBUF_BYTES MODE DEST_PORT...\n", argv[0]);
        return 2;
    }
    int rcvbuf = atoi(argv[2]), mode = atoi(argv[3]), one = 1;
    int in = socket(AF_INET, SOCK_DGRAM, 0);
    setsockopt(in, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (!(mode & 2)) {
        setsockopt(in, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    }
    struct timeval wait = {10, 0};
    setsockopt(in, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    if (bind(in, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("bind");
        return 1;
    }
    int n = argc - 4, outs[MAX_DESTS];
    for (int i = 0; i < n; i++) {
        struct sockaddr_in to = addr;
        to.sin_port = htons((unsigned short)atoi(argv[4 + i]));
        outs[i] = socket(AF_INET, SOCK_DGRAM, 0);
        if (connect(outs[i], (struct sockaddr *)&to, sizeof to) < 0) {
            perror("connect");
            return 1;
        }
    }
    for (int k = 0; k < BATCH; k++) {
        iovs[k].iov_base = bufs[k];
        iovs[k].iov_len = sizeof bufs[k];
        msgs[k].msg_hdr.msg_iov = &iovs[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
    }
    volatile long sink = 0;
    for (;;) {
        for (int k = 0; k < BATCH; k++) {
            msgs[k].msg_hdr.msg_name = &from[k];
            msgs[k].msg_hdr.msg_namelen = sizeof from[k];
            msgs[k].msg_hdr.msg_control = control[k];
            msgs[k].msg_hdr.msg_controllen = sizeof control[k];
            if (k > 0 && (mode & 4)) {
                break;
            }
        }
        int got;
        if (mode & 4) {
            ssize_t len = recvmsg(in, &msgs[0].msg_hdr, 0);
            if (len < 0) {
                continue;
            }
            msgs[0].msg_len = (unsigned)len;
            got = 1;
        } else {
            got = recvmmsg(in, msgs, BATCH, MSG_WAITFORONE, NULL);
            if (got <= 0) {
                continue;
            }
        }
        struct timespec t;
        if (mode & 1) {
            clock_gettime(CLOCK_REALTIME, &t);
            clock_gettime(CLOCK_MONOTONIC, &t);
        }
        for (int k = 0; k < got; k++) {
            struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[k].msg_hdr);
            if (c && c->cmsg_type == SCM_TIMESTAMPNS) {
                sink += ((struct timespec *)CMSG_DATA(c))->tv_nsec;
            }
            for (int i = 0; i < n; i++) {
                send(outs[i], bufs[k], msgs[k].msg_len, 0);
                if (mode & 1) {
                    clock_gettime(CLOCK_MONOTONIC, &t);
                    sink += t.tv_nsec;
                }
            }
        }
    }
}
