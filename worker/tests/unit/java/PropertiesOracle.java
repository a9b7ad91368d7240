import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;

/**
 * What java.util.Properties.load(InputStream) (MirrorMaker's way of reading its config files) makes of
 * some bytes, for kmirror's differential test (worker/tests/unit/config/test_properties_java.py).
 *
 * <p>Input: one case per line, the file's bytes in hex. Output: one line per case, "ERR" when load
 * throws, else "OK" and one tab-separated "key,value" per entry, each string written as the hex of its
 * UTF-16 code units (four digits each), so lone surrogates travel unchanged.
 */
public final class PropertiesOracle {
    private PropertiesOracle() {}

    private static byte[] unhex(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static String units(String s) {
        StringBuilder sb = new StringBuilder(s.length() * 4);
        for (int i = 0; i < s.length(); i++) {
            sb.append(String.format("%04x", (int) s.charAt(i)));
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, false, "US-ASCII");
        String line;
        while ((line = in.readLine()) != null) {
            Properties props = new Properties();
            try {
                props.load(new ByteArrayInputStream(unhex(line.trim())));
            } catch (IllegalArgumentException e) {
                out.println("ERR");
                continue;
            }
            StringBuilder sb = new StringBuilder("OK");
            for (Map.Entry<Object, Object> e : props.entrySet()) {
                sb.append('\t').append(units((String) e.getKey())).append(',').append(units((String) e.getValue()));
            }
            out.println(sb);
        }
        out.flush();
    }
}
