/* A C relay of the plainest shape, a peer for the end-to-end bench (issue 16):
 * a blocking recvfrom on the listening socket, then one sendto per
 * destination, nothing else. Written for this bench (not taken from any
 * other project); the bench compiles it with the system's C compiler.
 *
 * usage: c-relay LISTEN_PORT RCVBUF_BYTES DEST_PORT...   (all on 127.0.0.1)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_DESTS 16

int main(int argc, char **argv) {
    if (argc < 4 || argc - 3 > MAX_DESTS) {
        fprintf(stderr, "usage: %s LISTEN_PORT RCVBUF_BYTES DEST_PORT...\n", argv[0]);
        return 2;
    }
    int in = socket(AF_INET, SOCK_DGRAM, 0);
    int out = socket(AF_INET, SOCK_DGRAM, 0);
    if (in < 0 || out < 0) {
        perror("socket");
        return 1;
    }
    int rcvbuf = atoi(argv[2]);
    setsockopt(in, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    if (bind(in, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("bind");
        return 1;
    }
    int n = argc - 3;
    struct sockaddr_in dests[MAX_DESTS];
    for (int i = 0; i < n; i++) {
        dests[i] = addr;
        dests[i].sin_port = htons((unsigned short)atoi(argv[3 + i]));
    }
    static char buf[65536];
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t got = recvfrom(in, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        if (got < 0) {
            continue;
        }
        for (int i = 0; i < n; i++) {
            sendto(out, buf, (size_t)got, 0, (struct sockaddr *)&dests[i], sizeof dests[i]);
        }
    }
}
