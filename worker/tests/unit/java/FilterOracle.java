import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

import org.apache.kafka.server.util.TopicFilter;

/**
 * The Java side of kmirror's differential filter test: what MirrorMaker decides for a pattern and names.
 *
 * One request a line on stdin, fields separated by tabs, each field the hex of its UTF-8 bytes:
 * MODE PATTERN NAME... where MODE is T (the pattern is a raw --whitelist given to Apache Kafka's own
 * TopicFilter.IncludeList, preprocessing included) or P (the pattern goes to Pattern.compile as is).
 * One answer a line on stdout: "E" when the pattern is refused, otherwise one 0/1 per name (1: the
 * whole name matches; internal topics are not filtered out here).
 */
public final class FilterOracle {
    private static String unhex(String hex) {
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static String answer(String[] fields) {
        String mode = fields[0];
        String pattern = unhex(fields[1]);
        StringBuilder out = new StringBuilder();
        try {
            if (mode.equals("T")) {
                TopicFilter filter = new TopicFilter.IncludeList(pattern);
                for (int i = 2; i < fields.length; i++) {
                    out.append(filter.isTopicAllowed(unhex(fields[i]), false) ? '1' : '0');
                }
            } else {
                Pattern compiled = Pattern.compile(pattern);
                for (int i = 2; i < fields.length; i++) {
                    out.append(compiled.matcher(unhex(fields[i])).matches() ? '1' : '0');
                }
            }
        } catch (RuntimeException | StackOverflowError e) {
            return "E";
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            out.println(answer(line.split("\t", -1)));
        }
        out.flush();
    }
}
