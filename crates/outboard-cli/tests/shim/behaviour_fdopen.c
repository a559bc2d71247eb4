/* stdio over an engine socket: fdopen, fprintf/fgets, fclose; then the
 * descriptor number, reused for a file, must read the file (not the socket).
 * Usage: behaviour_fdopen IP PORT FILE */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char **argv) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    FILE *f = fdopen(s, "r+");
    fprintf(f, "hello\n"); fflush(f);
    char line[64]; if (!fgets(line, sizeof line, f)) { perror("fgets"); return 1; }
    printf("echo: %s", line);
    fclose(f);
    int fd = open(argv[3], O_RDONLY);
    char b[64] = {0}; ssize_t n = read(fd, b, sizeof b - 1);
    printf("fd reused=%d read=%zd ok=%d\n", fd == s, n, n > 0);
    return 0;
}
