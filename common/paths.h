/*
 * paths - the installed locations egress's programs agree on, named once: where egressd
 * listens for control and where it writes its decision log unless egressd.ini says
 * otherwise. egressd (config defaults), egressctl (its defaults) and egress-exec (doctor)
 * read them here, so no program includes another's headers for a path.
 * Header only; owns nothing.
 */
#ifndef EGRESS_PATHS_H
#define EGRESS_PATHS_H

#define EGRESS_CONTROL_SOCKET_DEFAULT "/run/egressd/control.sock"
#define EGRESS_DECISION_LOG_DEFAULT   "/var/log/egressd/decisions.jsonl"

#endif
