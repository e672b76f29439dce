"""The job's five topics and what each keeps, for how long and why: the one declaration of topic
retention (docs/operations.md, "Retention and erasure"). `deploy/local/create-topics.py
--role-retention` (what the Helm chart's topic Job runs) creates each new topic with its
`configs`; any other installer mirrors this table (each policy's `configs` are Kafka
topic configuration keys, as `kafka-topics.sh --config` takes them).

Why each policy is what it is (the `reason` of each entry says it in one sentence):
- events: the users' raw records, kept 7 days, as long as a restore from a retained checkpoint or
  savepoint needs them (a restored job resumes at the offsets its checkpoint holds).
- requirements: compacted by user id (the record key; `pwevent produce` keys by it, and a compacted
  topic refuses records without a key), and no record younger than 7 days is ever compacted
  (`min.compaction.lag.ms`). So a restore from a checkpoint at most 7 days old reads exactly the
  records the original job read after that checkpoint; and a user's tombstone (their id as the key,
  no value) erases every record of theirs within 7 days plus a segment roll. A fresh start (no state)
  reads only each user's latest record: each user is registered at it, which is not the original
  job's history (a dynamic mechanism's forks on each change, a fixed mechanism's refusal of a change
  are not replayed). That is safe (every user is protected at the requirement they declared last,
  in a new run with its own ledgers) but not equal to the original run; and the full audit needs
  every record of the audited period, so an archive of the requirements topic (a dump at least every
  7 days) is the audit's requirements input.
- releases: the published result, and what a fresh job's start check reads: kept forever.
- dead letters: rejected records with the head of their raw bytes (raw user ids too, with or
  without `pseudonymise`): kept 3 days, enough to diagnose a bad producer, shorter than the input.
- audit: the spend log `pwevent audit` proves the guarantee from, and what the resume guard reads:
  kept forever (as long as the audit must be provable; with `pseudonymise` it names no raw id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pwevent.jobs.common.slots import DAY_MS

#: How long the users' raw input records are kept: the oldest restore the deployment supports.
RESTORE_WINDOW_MS = 7 * DAY_MS


class TopicPolicy(NamedTuple):
    """A topic's defaults by its role: name, partition count, the topic configuration a new topic gets
    with --role-retention, and why. Immutable; a NamedTuple so that the create-topics script, loaded
    by path in tests, compares equal whichever copy of the module made it."""

    name: str
    partitions: int
    configs: Mapping[str, str]
    reason: str

    @property
    def retention_ms(self) -> int:
        return int(self.configs["retention.ms"])


#: role -> its policy (the roles are the job's `kafka.topics` keys, with `dead-letters` for `dead_letters`).
TOPIC_POLICIES: Mapping[str, TopicPolicy] = {
    "events": TopicPolicy("pwevent.events", 2, {"cleanup.policy": "delete", "retention.ms": str(RESTORE_WINDOW_MS)},
                          "the users' raw records, kept as long as a restore from a retained checkpoint needs them"),
    "requirements": TopicPolicy(
        "pwevent.requirements", 1,
        {"cleanup.policy": "compact", "retention.ms": "-1", "min.compaction.lag.ms": str(RESTORE_WINDOW_MS),
         "delete.retention.ms": str(DAY_MS)},
        "every user's latest requirement forever (fresh starts), every record for the restore window "
        "(restores), a user's tombstone erases them"),
    "releases": TopicPolicy("pwevent.releases", 1, {"cleanup.policy": "delete", "retention.ms": "-1"},
                            "the published result and a fresh job's start check: as long as analysts need it"),
    "dead-letters": TopicPolicy("pwevent.dead-letters", 1, {"cleanup.policy": "delete",
                                                            "retention.ms": str(3 * DAY_MS)},
                                "rejected records carry the head of their raw bytes: short, for diagnosis only"),
    "audit": TopicPolicy("pwevent.audit", 1, {"cleanup.policy": "delete", "retention.ms": "-1"},
                         "the spend log the audit proves the guarantee from: as long as it must be provable"),
}
