package pwevent.flink.membership;

import pwevent.flink.parsing.RequirementPayload;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

/**
 * {@link UserMembership} under {@link MembershipRule} against the Python reference on the shared
 * scenarios (tests/streaming/data/membership-scenarios.jsonl, which
 * tests/streaming/vectors/membership.py writes from tests/user_membership.py): the
 * same changes (class ids included), refusals with the same reasons and details, the same answers
 * to presences and the same final state, step by step. Also a round trip of the state through its
 * bytes after every step.
 */
class MembershipScenariosTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void everyScenarioDoesWhatThePythonDoes() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.membership",
                "tests/streaming/data/membership-scenarios.jsonl"));
        List<String> lines = Files.readAllLines(file);
        assertTrue(lines.size() >= 100, "scenarios read: " + lines.size());
        for (String line : lines) {
            JsonNode scenario = JSON.readTree(line);
            String name = scenario.get("name").asText();
            assertEquals(scenario.get("out"), JSON.readTree(JSON.writeValueAsString(replay(scenario))), name);
        }
    }

    private static List<Object> replay(JsonNode s) {
        MembershipRule rule = new MembershipRule(s.get("dynamic").asBoolean(), s.get("fixed_change_detail").asText(),
                text(s.get("default_requested")), text(s.get("default_ledger")));
        long origin = s.get("origin_ms").asLong();
        long slotMs = s.get("slot_ms").asLong();
        String name = s.get("user").asText();
        UserMembership user = new UserMembership();
        List<Object> out = new ArrayList<>();
        for (JsonNode step : s.get("steps")) {
            switch (step.get("op").asText()) {
                case "receive" -> {
                    RequirementPayload payload = new RequirementPayload(step.get("requested").asText(),
                            text(step.get("ledger")), text(step.get("detail")),
                            step.get("original").asText().getBytes(StandardCharsets.UTF_8));
                    UserMembership.Rejection late = user.receive(new UserMembership.Pending(step.get("slot").asLong(),
                            step.get("time").asLong(), step.get("partition").asInt(), step.get("offset").asLong(),
                            payload), step.get("watermark").asLong(), origin, slotMs);
                    if (late != null) {
                        out.add(rejection(late));
                    }
                }
                case "seen" -> out.add(Map.of("seen", user.seen(step.get("slot").asLong())));
                default -> {
                    for (Object done : user.close(step.get("slot").asLong(), name, rule, origin)) {
                        out.add(done instanceof MembershipRule.Change c ? change(c)
                                : rejection((UserMembership.Rejection) done));
                    }
                }
            }
            user = UserMembership.decode(user.encode());
        }
        JsonNode state = s.get("state");
        assertEquals(text(state.get("declared")), user.state().declared(), s.get("name").asText());
        assertEquals(text(state.get("class")), user.state().classId());
        assertEquals(text(state.get("requirement")), user.state().requirement());
        assertEquals(state.get("empty").asBoolean(), user.empty());
        return out;
    }

    private static Map<String, Object> change(MembershipRule.Change c) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("slot", c.slot());
        fields.put("user", c.user());
        fields.put("target", c.target());
        fields.put("previous", c.previous());
        fields.put("requirement", c.requirement());
        return Map.of("change", fields);
    }

    private static Map<String, Object> rejection(UserMembership.Rejection r) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("reason", r.reason());
        fields.put("detail", r.detail());
        fields.put("partition", r.partition());
        fields.put("offset", r.offset());
        fields.put("original", new String(r.original(), StandardCharsets.UTF_8));
        return Map.of("reject", fields);
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }
}
