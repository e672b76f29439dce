package pwevent.flink.membership;

import pwevent.flink.contract.Reasons;
import pwevent.flink.parsing.Json;
import pwevent.flink.parsing.RequirementPayload;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The membership rule of jobs/common/membership.py ({@code Membership.apply}, over
 * jobs/common/requirement_rules.py's {@code requirement_action}) for the streaming job's
 * {@link Membership}, on requirements as canonical JSON ({@link RequirementPayload}): the parser
 * already decided what the rules say of a requirement alone (the ledger requirement, or why there
 * is none), so what is left is what depends on the user: a requirement without a ledger is refused
 * ({@code invalid_requirement}, whatever the user declared before), a first requirement registers the
 * user in the root class of its ledger requirement, a repeat is ignored, a change is refused by a
 * fixed mechanism and forks the user's class under a dynamic one (unless the ledger requirement
 * stays the same). Tested equal to the Python on shared scenarios
 * (tests/streaming/data/membership-scenarios.jsonl).
 */
public final class MembershipRule implements Serializable {
    private static final long serialVersionUID = 1L;

    private final boolean dynamic;
    private final String fixedChangeDetail;
    private final String defaultRequested;
    private final String defaultLedger;

    /** `dynamic`: the mechanism takes changes; `fixedChangeDetail`: the detail of a change it refuses;
     *  the default requirement as declared and as its ledger runs (both null: none). */
    public MembershipRule(boolean dynamic, String fixedChangeDetail, String defaultRequested, String defaultLedger) {
        if ((defaultRequested == null) != (defaultLedger == null)) {
            throw new IllegalArgumentException("a default requirement has both forms or neither");
        }
        this.dynamic = dynamic;
        this.fixedChangeDetail = fixedChangeDetail;
        this.defaultRequested = defaultRequested;
        this.defaultLedger = defaultLedger;
    }

    public boolean hasDefault() {
        return defaultRequested != null;
    }

    /** A user's state: the requirement it declared last, its class and the class's requirement. */
    public record State(String declared, String classId, String requirement) {
        public static final State NONE = new State(null, null, null);
    }

    /** User `user` is represented by class `target` from `slot` on; `previous` null for a registration. */
    public record Change(long slot, String user, String target, String previous, String requirement) {
    }

    /** What a record did: the new state, and a change or a refusal (reason and detail), or neither. */
    public record Applied(State state, Change change, String reason, String detail) {
    }

    /** A requirement record of slot `slot` applied to `state` (jobs/common/membership.py, `Membership.apply`). */
    public Applied apply(String user, State state, long slot, RequirementPayload record) {
        return apply(user, state, slot, record.requested(), record.ledger(), record.detail());
    }

    /** The default requirement for a user present at `slot` without a class; null when there is none
     *  or the user has a class (`Membership.apply_default`). */
    public Applied applyDefault(String user, State state, long slot) {
        if (defaultRequested == null || state.classId() != null) {
            return null;
        }
        return apply(user, state, slot, defaultRequested, defaultLedger, null);
    }

    private Applied apply(String user, State state, long slot, String requested, String ledger, String detail) {
        if (ledger == null) {  // whatever the user declared before: Membership refuses it on arrival
            return new Applied(state, null, Reasons.INVALID_REQUIREMENT, detail);
        }
        boolean redeclare = state.declared() != null;
        if (redeclare && requested.equals(state.declared())) {
            return new Applied(state, null, null, null);
        }
        if (redeclare && !dynamic) {
            return new Applied(state, null, Reasons.REQUIREMENT_CHANGE_UNDER_FIXED, fixedChangeDetail);
        }
        if (redeclare && ledger.equals(state.requirement())) {
            return new Applied(new State(requested, state.classId(), ledger), null, null, null);
        }
        String previous = redeclare ? state.classId() : null;
        String target = classId(previous, previous == null ? null : slot, ledger);
        return new Applied(new State(requested, target, ledger), new Change(slot, user, target, previous, ledger),
                null, null);
    }

    /** The class of a root (`parent` and `since` null) or of a fork of `parent` at `since`
     *  (state/population.py, `class_id`): the first 20 hex digits of the SHA-256 of
     *  [parent, since, requirement] as compact JSON, the requirement's keys sorted. */
    public static String classId(String parent, Long since, String requirement) {
        String text = "[" + (parent == null ? "null" : Json.string(parent)) + "," + (since == null ? "null" : since)
                + "," + requirement + "]";
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(digest).substring(0, 20);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
