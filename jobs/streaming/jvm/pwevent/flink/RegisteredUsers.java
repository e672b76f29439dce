package pwevent.flink;

import java.util.Map;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The users the events' {@link ValidTime} knows (docs/streaming.md, "Time"): user -> the slot it is
 * registered from, the earliest slot winning, in keyed state under the operator's one key, so that
 * with RocksDB a checkpoint writes only those registered since the one before (a million registered
 * users are about 16 MB). A release that kept them as broadcast state, written whole at every
 * checkpoint, has them moved into the keyed state on a restore.
 */
final class RegisteredUsers {
    private static final Logger LOG = LoggerFactory.getLogger(RegisteredUsers.class);
    private static final MapStateDescriptor<String, Long> REGISTERED =
            new MapStateDescriptor<>("registered users", Types.STRING, Types.LONG);
    /** Where earlier releases kept them; left empty after a restore. */
    private static final MapStateDescriptor<String, Long> REGISTERED_BROADCAST =
            new MapStateDescriptor<>("registered", Types.STRING, Types.LONG);

    private final MapState<String, Long> users;
    private final Runnable atKey;

    private RegisteredUsers(MapState<String, Long> users, Runnable atKey) {
        this.users = users;
        this.atKey = atKey;
    }

    /**
     * The registered users of an operator being initialised: keyed state when it is `keyed` (the
     * events' instance), none otherwise (the requirements' instance knows every user). `atKey` sets
     * the operator's one key, before every access (also outside any element, when the gate opens).
     */
    static RegisteredUsers restore(StateInitializationContext context, boolean keyed, Runnable atKey)
            throws Exception {
        RegisteredUsers registered = new RegisteredUsers(
                keyed ? context.getKeyedStateStore().getMapState(REGISTERED) : null, atKey);
        if (context.getOperatorStateStore().getRegisteredBroadcastStateNames().contains(REGISTERED_BROADCAST.getName())) {
            registered.moveFrom(context.getOperatorStateStore().getBroadcastState(REGISTERED_BROADCAST));
        }
        return registered;
    }

    /** An earlier release's broadcast state into the keyed state; `before` is left empty. */
    private void moveFrom(BroadcastState<String, Long> before) throws Exception {
        int moved = 0;
        if (users != null) {
            for (Map.Entry<String, Long> entry : before.entries()) {
                register(entry.getKey(), entry.getValue());
                moved++;
            }
        }
        before.clear();
        if (moved > 0) {
            LOG.info("valid event time: moved {} registered users from an earlier release's broadcast state "
                    + "into keyed state", moved);
        }
    }

    /** The slot `user` is registered from; null if it is not. */
    Long since(String user) throws Exception {
        atKey.run();
        return users.get(user);
    }

    /** `user` registered from `slot`, unless it already is from an earlier one. */
    void register(String user, long slot) throws Exception {
        atKey.run();
        Long since = users.get(user);
        if (since == null || slot < since) {
            users.put(user, slot);
        }
    }
}
